"""A loopback HTTP server that speaks the OpenAI chat-completions and Anthropic messages protocols.

The provider runtimes are tested through the real SDK clients pointed at this server with
`base_url`, so what is tested is the bytes on the wire: the JSON the SDK sends (recorded in
`server.requests`) and the JSON / server-sent events it has to parse. Each test scripts the
server's replies as a queue (`server.push(...)`); a request with nothing queued gets a 599 error
whose message says so. Faults are replies too: a status with headers and a body, a slow reply,
a stream that stalls or whose connection drops mid-way, a malformed body. A reply can also end
with the provider's own finish reason (a cut at the token limit, a refusal), and can wait until
a number of requests are in flight at once (`gate=`), so concurrency is shown by counting
(`server.max_in_flight`), never by timing. Refusal rules (`server.refuse(when, status,
message)`) answer every request of a form the emulated server does not accept with its error,
as vLLM, llama.cpp or llama-cpp-python do, whatever the queue holds.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: A distinctive fake key: tests look for it (and for pieces of it) everywhere it must not be.
FAKE_KEY = "sk-op-test-Q7xW9zK2mP4vR8tY6uJ3"


@dataclass
class Reply:
    """One scripted reply. `kind` is "message" (a protocol reply: text and/or tool calls, streamed
    when the request asks for it), "status" (an error status with a JSON body), "raw" (a body sent
    as-is) or "close" (close the connection without answering)."""
    kind: str = "message"
    text: str = ""
    tool_calls: list[tuple] = field(default_factory=list)   # (id, name, args dict or raw str)
    usage: tuple[int, int] = (11, 7)
    model: str | None = None
    status: int = 200
    body: Any = None
    headers: dict = field(default_factory=dict)
    delay: float = 0.0            # seconds before the reply starts
    chunk: int = 4                # characters per streamed text delta
    args_chunk: int = 5           # characters per streamed piece of a tool call's arguments
    chunk_delay: float = 0.0      # seconds between streamed events
    drop_after: int | None = None  # streamed: close the connection after this many text deltas
    stall_after: int | None = None  # streamed: stop sending (hold the connection) after n deltas
    truncate: bool = False        # streamed: end the body cleanly but without the final events
    bad_event: bool = False       # streamed: send a data line that is not JSON
    error_after: int | None = None  # streamed: send the provider's error event after n deltas
    err_type: str = "api_error"   # "status": the provider's error type
    raw_utf8: bool = False        # send JSON text unescaped, a lone surrogate as its raw bytes
                                  # (ED A0 80 for \ud800: not valid UTF-8, as a buggy server would)
    finish: str | None = None     # the finish / stop reason instead of "stop" / "end_turn" (or
                                  # the tool-use one): "length", "max_tokens", "refusal", ...
    refusal: str | None = None    # OpenAI: message.refusal (streamed as delta.refusal)
    gate: int | None = None       # answer only once this many requests are in flight at once
    no_usage: bool = False        # OpenAI: send no usage, even when stream_options asks for it
                                  # (as llama-cpp-python's server does)
    logprobs: list | None = None  # OpenAI: the reply's tokens, each (token, logprob, [(alt,
                                  # logprob), ...]), sent when the request asks logprobs (the
                                  # tokens spell the text; streamed one token a chunk); a dict or
                                  # a string is sent as the logprobs field as it is (malformed)
    logprobs_unasked: bool = False  # OpenAI: send `logprobs` even when the request does not
                                    # ask for them (a server that always does)


def logprob_tokens(tokens: list) -> Any:
    """A Reply's `logprobs` as OpenAI's `choices[0].logprobs.content` (a malformed one as is)."""
    if not isinstance(tokens, list):
        return tokens
    return [{"token": t, "logprob": lp, "bytes": list(t.encode("utf-8")),
             "top_logprobs": [{"token": a, "logprob": alp, "bytes": list(a.encode("utf-8"))}
                              for a, alp in alts]}
            for t, lp, alts in tokens]


def text(t: str, **kw) -> Reply:
    return Reply(text=t, **kw)


def tools(*calls: tuple, text: str = "", **kw) -> Reply:
    return Reply(text=text, tool_calls=list(calls), **kw)


def status(code: int, message: str = "error", *, headers: dict | None = None,
           err_type: str = "api_error", provider_body: Any = None) -> Reply:
    return Reply(kind="status", status=code, body=provider_body, text=message,
                 headers=dict(headers or {}), err_type=err_type)


def raw(body: str, *, content_type: str = "application/json", code: int = 200) -> Reply:
    return Reply(kind="raw", status=code, body=body, headers={"Content-Type": content_type})


@dataclass
class Refusal:
    """A rule of the server's own: a request whose body `when(body)` is true is answered with
    this error instead of the next queued reply, as a server answers a request form it does not
    accept (`body` is the whole error body when the server has its own shape)."""
    when: Any
    status: int = 400
    message: str = "unsupported"
    body: Any = None
    crash: bool = False   # answer 200, end the stream with no event and close the connection,
                          # as llama-cpp-python does when its chat handler raises mid-stream


def tool_fields_error(provider: str, body: Any) -> str | None:
    """The 400 message the real API gives a request whose tools carry `input_examples` it
    refuses, or None. Anthropic's messages API takes the field on a tool and checks each
    example against the tool's input schema; OpenAI's chat completions has no such field and
    refuses an unknown one."""
    if not isinstance(body, dict) or not isinstance(body.get("tools"), list):
        return None
    for i, tool in enumerate(body["tools"]):
        if not isinstance(tool, dict):
            continue
        if provider == "openai":
            fn = tool.get("function") if isinstance(tool.get("function"), dict) else {}
            if "input_examples" in tool or "input_examples" in fn:
                return f"Unrecognized request argument supplied: tools[{i}].input_examples"
            continue
        examples = tool.get("input_examples")
        if examples is None:
            continue
        if not isinstance(examples, list) or not all(isinstance(e, dict) for e in examples):
            return f"tools.{i}.input_examples: Input should be a valid list of objects"
        import jsonschema
        for k, example in enumerate(examples):
            error = jsonschema.exceptions.best_match(
                jsonschema.Draft202012Validator(tool.get("input_schema") or {}).iter_errors(
                    example))
            if error is not None:
                return (f"tools.{i}.input_examples.{k}: the example does not match the "
                        f"tool's input_schema: {error.message}")
    return None


def deferred_tool_error(provider: str, body: Any) -> str | None:
    """The 400 the messages API gives a conversation that calls a tool sent with
    `defer_loading` which no tool search in that conversation loaded, or None. A deferred
    tool is loaded by a `tool_search_tool_result` whose `tool_references` name it, and that
    result must follow its `server_tool_use` (the same id) in an earlier or the same assistant
    turn: what a re-ask that rebuilds the turn without those blocks would lose. (The rule is
    the documented one; the wording of the message is this server's.)"""
    if provider != "anthropic" or not isinstance(body, dict):
        return None
    deferred = {t.get("name") for t in body.get("tools") or []
                if isinstance(t, dict) and t.get("defer_loading")}
    if not deferred:
        return None
    loaded: set = set()
    for i, m in enumerate(body.get("messages") or []):
        if not isinstance(m, dict) or m.get("role") != "assistant" or \
                not isinstance(m.get("content"), list):
            continue
        searches = set()
        for k, b in enumerate(m["content"]):
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "server_tool_use":
                searches.add(b.get("id"))
            elif kind == "tool_search_tool_result":
                if b.get("tool_use_id") not in searches:
                    return (f"messages.{i}.content.{k}: tool_search_tool_result block(s) "
                            f"must follow the server_tool_use block with the same id")
                refs = (b.get("content") or {}).get("tool_references") or []
                loaded |= {r.get("tool_name") for r in refs if isinstance(r, dict)}
            elif kind == "tool_use" and b.get("name") in deferred - loaded:
                return (f"messages.{i}.content.{k}: tool_use of {b.get('name')!r}, a tool "
                        f"with defer_loading that no tool search in this conversation loaded")
    return None


class _QuietServer(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a run opening 64 connections at once then sees
    # some reset, which no provider's server does (their backlogs are in the hundreds)
    request_queue_size = 128

    def handle_error(self, request, client_address):
        pass  # a client hanging up (the point of several tests) is not an error here


@dataclass
class Request:
    method: str
    path: str
    headers: dict
    body: Any
    at: float = field(default_factory=time.monotonic)   # the server's clock, on arrival


class FakeServer:
    """`FakeServer("openai")` or `FakeServer("anthropic")`; use as a context manager."""

    def __init__(self, provider: str, responder: Any = None):
        if provider not in ("openai", "anthropic"):
            raise ValueError(provider)
        self.provider = provider
        # answers a request when nothing is queued: responder(body) -> Reply, so a reply can
        # depend on what is asked whatever order concurrent requests arrive in
        self.responder = responder
        self.replies: list[Reply] = []
        self.requests: list[Request] = []
        self.refusals: list[Refusal] = []
        self.refused = 0   # requests answered by a refusal rule
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._gate = threading.Condition(self._lock)
        self.in_flight = 0
        self.max_in_flight = 0
        # the batch protocols (OpenAI files + batches, Anthropic message batches): each batch
        # is answered whole at creation (by the queue / responder, one reply per request line)
        # and walks `batch_statuses`, one step per retrieve; `batch_end` ("expired",
        # "cancelled") ends it instead of "completed", answering only its first `batch_answer`
        # requests
        self.batches: dict[str, dict] = {}
        self.files: dict[str, bytes] = {}
        self.batch_statuses = ["validating", "in_progress", "finalizing", "completed"]
        self.batch_end: str | None = None
        self.batch_answer: int | None = None
        self.batches_created = 0
        self.batch_id_prefix = "batch_"      # a hostile server's ids: the key, say
        self.batch_refusal: Reply | None = None   # a status every files / batches call gets
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                server._handle(self)

            def do_GET(self):
                server._handle(self)

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        kwargs={"poll_interval": 0.02})

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What the SDK takes as base_url: OpenAI's includes the /v1 prefix, Anthropic's not."""
        return self.url + "/v1" if self.provider == "openai" else self.url

    def push(self, *replies: Reply) -> FakeServer:
        with self._lock:
            self.replies.extend(replies)
        return self

    def refuse(self, when, status: int = 400, message: str = "unsupported", *,
               body: Any = None, crash: bool = False) -> FakeServer:
        """Answer every request whose body matches `when` with this error (checked before the
        queue: a refused request takes no queued reply); `crash=True`: a streamed request gets
        a 200 whose stream ends before any event, on a connection then closed."""
        with self._lock:
            self.refusals.append(Refusal(when, status, message, body, crash))
        return self

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    # -- one request --------------------------------------------------------------------------
    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server is stopping; True if it is."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._gate.notify_all()
        try:
            self._answer(h)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _wait_for(self, n: int) -> None:
        """Hold this request until `n` have been in flight at once (the most so far, since the
        first released may finish before the others look again); a client that never sends
        them (it runs its requests one by one) gets its answer after a safety wait, and the
        test's count of `max_in_flight` tells."""
        with self._gate:
            self._gate.wait_for(lambda: self.max_in_flight >= n or self._stopping.is_set(),
                                timeout=30)

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        raw_body = h.rfile.read(n) if n else b""
        if "/batches" in h.path or "/files" in h.path:
            return self._batch_api(h, raw_body)
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = raw_body.decode("utf-8", "replace")
        with self._lock:
            self.requests.append(Request(h.command, h.path, dict(h.headers), body))
            rule = next((r for r in self.refusals if isinstance(body, dict) and r.when(body)),
                        None)
            wrong = tool_fields_error(self.provider, body) or \
                deferred_tool_error(self.provider, body)
            if rule is None and wrong is not None:   # the API's own check, before any reply
                rule = Refusal(lambda b: True, 400, wrong)
            if rule is not None:
                self.refused += 1
                if rule.crash and body.get("stream"):
                    return self._crash(h)
                reply = Reply(kind="status", status=rule.status, text=rule.message,
                              body=rule.body, err_type="invalid_request_error")
            else:
                reply = self.replies.pop(0) if self.replies else None
        if reply is None and rule is None and self.responder is not None:
            reply = self.responder(body)
        if reply is None:
            return self._send_json(h, 599, {"error": {"message": "the fake server has no reply "
                                                      "queued for this request"}})
        if reply.gate:
            self._wait_for(reply.gate)
        if self._sleep(reply.delay):
            return
        if reply.kind == "close":
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if reply.kind == "raw":
            data = reply.body.encode("utf-8", "surrogatepass")
            h.send_response(reply.status)
            for k, v in reply.headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            return
        if reply.kind == "status":
            return self._send_json(h, reply.status, self._error_body(reply), reply.headers,
                                   reply)
        stream = isinstance(body, dict) and bool(body.get("stream"))
        model = reply.model or (body.get("model") if isinstance(body, dict) else None) or "m"
        if self.provider == "openai" and isinstance(body, dict) and \
                isinstance(body.get("n"), int) and body["n"] > 1:
            return self._openai_choices(h, [reply, *self._more(body, body["n"] - 1)], model,
                                        body, stream)
        if self.provider == "openai":
            if stream:
                return self._stream(h, reply, self._openai_events(reply, model, body))
            return self._send_json(h, 200, self._openai_message(reply, model, body), reply=reply)
        if stream:
            return self._stream(h, reply, self._anthropic_events(reply, model))
        return self._send_json(h, 200, self._anthropic_message(reply, model), reply=reply)

    def _more(self, body: dict, k: int) -> list[Reply]:
        """Up to `k` more message replies for the choices of one `n=` request: the queued ones
        (then the responder's), stopping at the first that is not a message, as a server that
        returns fewer choices than asked (Ollama returns one)."""
        out: list[Reply] = []
        while len(out) < k:
            with self._lock:
                nxt = self.replies[0] if self.replies else None
                if nxt is not None:
                    if nxt.kind != "message":
                        break
                    self.replies.pop(0)
            if nxt is None and self.responder is not None:
                nxt = self.responder(body)
            if nxt is None or nxt.kind != "message":
                break
            out.append(nxt)
        return out

    def _openai_choices(self, h, replies: list[Reply], model: str, body: dict,
                        stream: bool) -> None:
        """One answer with a choice per reply (index i for the i-th), as OpenAI answers `n=`:
        the usage counts the prompt once and every choice's completion; streamed, each
        choice's chunks carry its index, one choice after the other."""
        usage = (replies[0].usage[0], sum(r.usage[1] for r in replies))
        if not stream:
            out = self._openai_message(replies[0], model, body)
            for i, r in enumerate(replies[1:], 1):
                choice = self._openai_message(r, model, body)["choices"][0]
                out["choices"].append({**choice, "index": i})
            if "usage" in out:
                out["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                "total_tokens": sum(usage)}
            return self._send_json(h, 200, out, reply=replies[0])
        events = []
        for i, r in enumerate(replies):
            last = i == len(replies) - 1
            tail = replace(r, usage=usage) if last else r
            events += self._openai_events(tail, model, body, index=i, tail=last)
        return self._stream(h, replies[0], events)

    # -- the batch protocols -------------------------------------------------------------------
    def _reply_for(self, body: Any) -> Reply:
        with self._lock:
            reply = self.replies.pop(0) if self.replies else None
        if reply is None and self.responder is not None:
            reply = self.responder(body)
        return reply if reply is not None else status(599, "no reply queued")

    def _line_answer(self, body: dict) -> tuple[int, Any]:
        """One request of a batch answered as the online endpoint would (never streamed)."""
        reply = self._reply_for(body)
        model = reply.model or body.get("model") or "m"
        if reply.kind == "status":
            return reply.status, self._error_body(reply)
        if self.provider == "openai":
            return 200, self._openai_message(reply, model)
        return 200, self._anthropic_message(reply, model)

    def _new_batch(self, lines: list[tuple[str, dict]]) -> dict:
        with self._lock:
            self.batches_created += 1
            bid = f"{self.batch_id_prefix}{self.batches_created:04d}"
        answers = {cid: self._line_answer(body) for cid, body in lines}
        batch = {"id": bid, "order": [cid for cid, _ in lines], "answers": answers, "step": 0,
                 "end": self.batch_end, "answer": self.batch_answer, "cancelled": False}
        self.batches[bid] = batch
        return batch

    def _status_of(self, batch: dict, advance: bool) -> str:
        if batch["cancelled"]:
            return "cancelled"
        steps = self.batch_statuses
        if advance and batch["step"] < len(steps) - 1:
            batch["step"] += 1
        state = steps[batch["step"]]
        if state == "completed" and batch["end"]:
            return batch["end"]
        return state

    def _answered_ids(self, batch: dict, state: str) -> list[str]:
        if state == "completed":
            return batch["order"]
        if state in ("expired", "cancelled"):
            return batch["order"][:batch["answer"] or 0]
        return []

    def _openai_batch(self, batch: dict, state: str) -> dict:
        done = self._answered_ids(batch, state)
        ok = [c for c in done if batch["answers"][c][0] == 200]
        bad = [c for c in done if batch["answers"][c][0] != 200]
        terminal = state in ("completed", "expired", "cancelled")
        return {"id": batch["id"], "object": "batch", "endpoint": "/v1/chat/completions",
                "completion_window": "24h", "input_file_id": f"file-in-{batch['id']}",
                "status": state, "created_at": 1,
                "output_file_id": f"file-out-{batch['id']}" if terminal and ok else None,
                "error_file_id": f"file-err-{batch['id']}" if terminal and bad else None,
                "request_counts": {"total": len(batch["order"]), "completed": len(ok),
                                   "failed": len(bad)}}

    def _anthropic_batch(self, batch: dict, state: str) -> dict:
        done = self._answered_ids(batch, state)
        ended = state in ("completed", "expired", "cancelled")
        ok = sum(batch["answers"][c][0] == 200 for c in done)
        counts = {"processing": 0 if ended else len(batch["order"]), "succeeded": ok,
                  "errored": len(done) - ok,
                  "canceled": len(batch["order"]) - len(done) if state == "cancelled" else 0,
                  "expired": len(batch["order"]) - len(done) if state == "expired" else 0}
        return {"id": batch["id"], "type": "message_batch",
                "processing_status": "ended" if ended else
                ("canceling" if batch["cancelled"] else "in_progress"),
                "request_counts": counts, "created_at": "2026-01-01T00:00:00Z",
                "expires_at": "2026-01-02T00:00:00Z", "ended_at": None, "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{batch['id']}/results"
                if ended else None}

    def _results_lines(self, batch: dict, state: str, errors: bool | None) -> bytes:
        out = []
        done = self._answered_ids(batch, state)
        for cid in batch["order"]:
            code, body = batch["answers"][cid]
            if self.provider == "openai":
                if cid not in done or (code == 200) == bool(errors):
                    continue
                out.append({"id": f"r-{cid}", "custom_id": cid, "error": None,
                            "response": {"status_code": code, "request_id": f"q-{cid}",
                                         "body": body}})
            elif cid in done:
                result = {"type": "succeeded", "message": body} if code == 200 else \
                    {"type": "errored", "error": body}
                out.append({"custom_id": cid, "result": result})
            else:
                out.append({"custom_id": cid, "result": {
                    "type": "canceled" if state == "cancelled" else "expired"}})
        return b"".join(json.dumps(o).encode() + b"\n" for o in out)

    def _batch_api(self, h: BaseHTTPRequestHandler, raw_body: bytes) -> None:
        path = h.path.split("?")[0]
        with self._lock:
            self.requests.append(Request(h.command, path, dict(h.headers), None))
        if self.batch_refusal is not None:
            reply = self.batch_refusal
            return self._send_json(h, reply.status, self._error_body(reply), reply.headers,
                                   reply)
        parts = [p for p in path.split("/") if p]
        if self.provider == "openai":
            if path == "/v1/files" and h.command == "POST":
                import email
                form = email.message_from_bytes(
                    b"Content-Type: " + h.headers["Content-Type"].encode() + b"\r\n\r\n"
                    + raw_body)
                content = next(part.get_payload(decode=True) for part in form.get_payload()
                               if part.get_filename())
                fid = f"file-{len(self.files) + 1:04d}"
                self.files[fid] = content
                return self._send_json(h, 200, {"id": fid, "object": "file", "bytes":
                                                len(content), "created_at": 1, "filename":
                                                "batch.jsonl", "purpose": "batch",
                                                "status": "processed"})
            if path == "/v1/batches" and h.command == "POST":
                body = json.loads(raw_body)
                lines = [json.loads(x) for x in self.files[body["input_file_id"]].splitlines()
                         if x.strip()]
                batch = self._new_batch([(x["custom_id"], x["body"]) for x in lines])
                return self._send_json(h, 200, self._openai_batch(batch, "validating"))
            if parts[:2] == ["v1", "batches"] and len(parts) >= 3:
                batch = self.batches[parts[2]]
                if parts[-1] == "cancel":
                    batch["cancelled"] = True
                return self._send_json(h, 200, self._openai_batch(
                    batch, self._status_of(batch, parts[-1] != "cancel")))
            if parts[:2] == ["v1", "files"] and parts[-1] == "content":
                fid = parts[2]
                kind, bid = fid.split("-", 2)[1], fid.split("-", 2)[2]
                batch = self.batches[bid]
                state = self._status_of(batch, False)
                data = self._results_lines(batch, state, kind == "err")
                h.send_response(200)
                h.send_header("Content-Type", "application/octet-stream")
                h.send_header("Content-Length", str(len(data)))
                h.end_headers()
                h.wfile.write(data)
                return
        else:
            if path == "/v1/messages/batches" and h.command == "POST":
                body = json.loads(raw_body)
                batch = self._new_batch([(r["custom_id"], r["params"])
                                         for r in body["requests"]])
                return self._send_json(h, 200, self._anthropic_batch(batch, "in_progress"))
            if parts[:3] == ["v1", "messages", "batches"] and len(parts) >= 4:
                batch = self.batches[parts[3]]
                if parts[-1] == "results":
                    data = self._results_lines(batch, self._status_of(batch, False), None)
                    h.send_response(200)
                    h.send_header("Content-Type", "application/binary")
                    h.send_header("Content-Length", str(len(data)))
                    h.end_headers()
                    h.wfile.write(data)
                    return
                if parts[-1] == "cancel":
                    batch["cancelled"] = True
                return self._send_json(h, 200, self._anthropic_batch(
                    batch, self._status_of(batch, parts[-1] != "cancel")))
        return self._send_json(h, 404, {"error": {"message": f"no such endpoint {path}"}})

    @staticmethod
    def _crash(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
        h.close_connection = True

    @staticmethod
    def _json(obj: Any, reply: Reply | None = None) -> str:
        return json.dumps(obj, ensure_ascii=not (reply and reply.raw_utf8))

    def _send_json(self, h, code: int, obj: Any, headers: dict | None = None,
                   reply: Reply | None = None) -> None:
        data = self._json(obj, reply).encode("utf-8", "surrogatepass")
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _error_body(self, reply: Reply) -> Any:
        if reply.body is not None:
            return reply.body
        if self.provider == "openai":
            return {"error": {"message": reply.text, "type": reply.err_type, "param": None,
                              "code": None}}
        return {"type": "error", "error": {"type": reply.err_type, "message": reply.text}}

    def _stream(self, h, reply: Reply, events: list[tuple[str | None, str, bool]]) -> None:
        """Server-sent events in chunked transfer encoding, so that closing the socket early is a
        dropped connection (an incomplete body), not a clean end."""
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def send(data: bytes) -> None:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()

        deltas = 0
        for name, data, is_text in events:
            if is_text:
                if reply.drop_after is not None and deltas >= reply.drop_after:
                    h.close_connection = True
                    h.connection.shutdown(socket.SHUT_RDWR)
                    return
                if reply.stall_after is not None and deltas >= reply.stall_after:
                    self._sleep(3600)
                    return
                if reply.error_after is not None and deltas >= reply.error_after:
                    err = {"type": "overloaded_error", "message": "Overloaded"}
                    send((f"data: {json.dumps({'error': err})}\n\n" if self.provider == "openai"
                          else "event: error\ndata: " + json.dumps({"type": "error", "error": err})
                          + "\n\n").encode())
                    h.wfile.write(b"0\r\n\r\n")
                    return
                deltas += 1
            if self._sleep(reply.chunk_delay):
                return
            line = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
            send(line.encode("utf-8", "surrogatepass"))
        h.wfile.write(b"0\r\n\r\n")

    # -- OpenAI ---------------------------------------------------------------------------------
    @staticmethod
    def _args_text(args: Any) -> str:
        return args if isinstance(args, str) else json.dumps(args)

    @staticmethod
    def _openai_finish(reply: Reply) -> str:
        return reply.finish or ("tool_calls" if reply.tool_calls else "stop")

    @staticmethod
    def _anthropic_stop(reply: Reply) -> str:
        return reply.finish or ("tool_use" if reply.tool_calls else "end_turn")

    def _openai_message(self, reply: Reply, model: str, body: Any = None) -> dict:
        msg: dict = {"role": "assistant", "content": reply.text or None,
                     "refusal": reply.refusal}
        if reply.tool_calls:
            msg["tool_calls"] = [{"id": i, "type": "function",
                                  "function": {"name": n, "arguments": self._args_text(a)}}
                                 for i, n, a in reply.tool_calls]
        out = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
               "choices": [{"index": 0, "message": msg, "logprobs": None,
                            "finish_reason": self._openai_finish(reply)}],
               "usage": {"prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
                         "total_tokens": sum(reply.usage)}}
        if reply.no_usage:
            del out["usage"]
        if isinstance(body, dict) and (body.get("logprobs") or reply.logprobs_unasked) and \
                reply.logprobs is not None:
            tokens = logprob_tokens(reply.logprobs)
            out["choices"][0]["logprobs"] = {"content": tokens} if isinstance(tokens, list) \
                else tokens
        return out

    def _openai_events(self, reply: Reply, model: str, body: dict, index: int = 0,
                       tail: bool = True) -> list:
        """A streamed reply's events, as choice `index`; `tail=False`: without the usage chunk
        and the closing [DONE] (a choice other than the last of an `n=` answer)."""
        def chunk(delta: dict, finish=None, usage=None, choices=True, logprobs=None):
            c = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                 "model": model,
                 "choices": [{"index": index, "delta": delta, "finish_reason": finish,
                              **({"logprobs": logprobs} if logprobs is not None else {})}]
                 if choices else []}
            if usage is not None:
                c["usage"] = usage
            return self._json(c, reply)

        ev = [(None, chunk({"role": "assistant", "content": ""}), False)]
        if reply.refusal:
            for i in range(0, len(reply.refusal), reply.chunk):
                ev.append((None, chunk({"refusal": reply.refusal[i:i + reply.chunk]}), False))
        if body.get("logprobs") and isinstance(reply.logprobs, list):
            for entry in logprob_tokens(reply.logprobs):  # one token a chunk, as servers do
                ev.append((None, chunk({"content": entry["token"]},
                                       logprobs={"content": [entry]}), True))
        for i in range(0, len(reply.text) if not (body.get("logprobs") and isinstance(
                reply.logprobs, list)) else 0, reply.chunk):
            ev.append((None, chunk({"content": reply.text[i:i + reply.chunk]}), True))
            if reply.bad_event and i == 0:
                ev.append((None, '{"id": "chatcmpl-1", "choices": [', False))
        for k, (cid, name, args) in enumerate(reply.tool_calls):
            ev.append((None, chunk({"tool_calls": [{"index": k, "id": cid, "type": "function",
                                                    "function": {"name": name,
                                                                 "arguments": ""}}]}), False))
            a = self._args_text(args)
            for j in range(0, len(a), reply.args_chunk):
                ev.append((None, chunk({"tool_calls": [{"index": k, "function": {
                    "arguments": a[j:j + reply.args_chunk]}}]}), False))
        if reply.truncate:
            return ev
        ev.append((None, chunk({}, self._openai_finish(reply)), False))
        if not tail:
            return ev
        if (body.get("stream_options") or {}).get("include_usage") and not reply.no_usage:
            ev.append((None, chunk({}, usage={"prompt_tokens": reply.usage[0],
                                              "completion_tokens": reply.usage[1],
                                              "total_tokens": sum(reply.usage)},
                                   choices=False), False))
        ev.append((None, "[DONE]", False))
        return ev

    # -- Anthropic ------------------------------------------------------------------------------
    @staticmethod
    def _input(args: Any) -> Any:
        """A tool call's input as the messages API carries it whole: an object. Arguments
        given as JSON text (which a stream sends as written, escapes and all) are decoded;
        text that is not JSON is sent as it is."""
        if isinstance(args, str):
            try:
                return json.loads(args)
            except ValueError:
                return args
        return args

    def _anthropic_message(self, reply: Reply, model: str) -> dict:
        content: list = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for i, n, a in reply.tool_calls:
            content.append({"type": "tool_use", "id": i, "name": n, "input": self._input(a)})
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_sequence": None,
                "stop_reason": self._anthropic_stop(reply),
                "usage": {"input_tokens": reply.usage[0], "output_tokens": reply.usage[1]}}

    def _anthropic_events(self, reply: Reply, model: str) -> list:
        def e(name: str, obj: dict, is_text: bool = False):
            return (name, self._json({"type": name, **obj}, reply), is_text)

        ev = [e("message_start", {"message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": reply.usage[0], "output_tokens": 1}}}),
            ("ping", json.dumps({"type": "ping"}), False)]
        index = 0
        if reply.text:
            ev.append(e("content_block_start", {"index": 0,
                                                "content_block": {"type": "text", "text": ""}}))
            for i in range(0, len(reply.text), reply.chunk):
                ev.append(e("content_block_delta", {"index": 0, "delta": {
                    "type": "text_delta", "text": reply.text[i:i + reply.chunk]}}, True))
                if reply.bad_event and i == 0:
                    ev.append(("content_block_delta", '{"type": "content_block_delta", ', False))
            ev.append(e("content_block_stop", {"index": 0}))
            index = 1
        for k, (cid, name, args) in enumerate(reply.tool_calls, start=index):
            ev.append(e("content_block_start", {"index": k, "content_block": {
                "type": "tool_use", "id": cid, "name": name, "input": {}}}))
            a = self._args_text(args)
            for j in range(0, len(a), reply.args_chunk):
                ev.append(e("content_block_delta", {"index": k, "delta": {
                    "type": "input_json_delta", "partial_json": a[j:j + reply.args_chunk]}}))
            ev.append(e("content_block_stop", {"index": k}))
        if reply.truncate:
            return ev
        ev.append(e("message_delta", {"delta": {
            "stop_reason": self._anthropic_stop(reply), "stop_sequence": None},
            "usage": {"output_tokens": reply.usage[1]}}))
        ev.append(e("message_stop", {}))
        return ev


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
