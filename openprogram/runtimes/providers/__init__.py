"""The runtimes that talk to a hosted model through its official SDK: OpenAI's chat completions
(and any server that speaks them, on `base_url=`), Anthropic's messages, and both providers'
batch APIs. `runtime` holds what they share (the key and its redaction, the stream loop, the mode
arguments), `transport` the time budget on the wire, `faults` the words for a failure,
`replies` the request and reply as data, `server_forms` the request forms negotiated with a
server that refuses one, `strict_schema` the rewrite for strict structured outputs, `logprobs`
the probabilities read from a reply, `raw_record` the raw exchange kept on every reply, and
`key_redaction` what keeps a key out (text UTF-8 cannot encode is made sendable by
`base.json_form.sendable`). `openprogram.runtimes`
re-exports the runtimes.
"""
