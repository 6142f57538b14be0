"""An MCP server over stdio written by hand, JSON-RPC line by line, that answers with whatever
its script file says, well-formed or not: a hostile or broken server, for the tests of what the
library does with what a server sends (tests/mcp). `python raw_mcp_server.py SCRIPT.json`, where
the script holds `tools` (the tools/list answer), `calls` ({tool name: the tools/call result}),
`resources`, `templates`, `reads` ({uri: the resources/read result}), `prompts`, `prompt_results`
({name: the prompts/get result}) and `capabilities` (what initialize says it has); `${NAME}` in
it is the server's environment variable NAME (a server that echoes the token it was given). A
request it has no answer for gets JSON-RPC's "method not found"."""
import json
import os
import string
import sys


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        script = json.loads(string.Template(f.read()).safe_substitute(os.environ))
    answers = {
        "ping": lambda p: {},
        "tools/list": lambda p: {"tools": script.get("tools", [])},
        "tools/call": lambda p: script.get("calls", {}).get(p.get("name")),
        "resources/list": lambda p: {"resources": script.get("resources", [])},
        "resources/templates/list": lambda p: {"resourceTemplates": script.get("templates", [])},
        "resources/read": lambda p: script.get("reads", {}).get(p.get("uri")),
        "prompts/list": lambda p: {"prompts": script.get("prompts", [])},
        "prompts/get": lambda p: script.get("prompt_results", {}).get(p.get("name")),
    }
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:  # a notification: nothing to answer
            continue
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            result = {"protocolVersion": params.get("protocolVersion"),
                      "capabilities": script.get("capabilities", {"tools": {}}),
                      "serverInfo": {"name": "raw", "version": "0"}}
        else:
            result = answers.get(method, lambda p: None)(params)
        if result is None:
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "error": {"code": -32601, "message": f"no answer for {method}"}}
        else:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
