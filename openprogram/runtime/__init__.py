"""The runtime, above the decision loop: the DAG of every model call and Agent method call,
`Runtime` (the one place that talks to a model, sync or async, implementing
`base.model_protocol.ModelCaller`) with `exec()` and the turns that end in a decision (`runtime`),
native tools and the tool loop (`tools`, loaded with the first `exec()`), `Agent` and `agent()`
(`agent`) and the original project's `agentic_function` (`function`). `openprogram` re-exports
the public names; the concrete runtimes in `openprogram.runtimes` subclass `Runtime`.
"""
