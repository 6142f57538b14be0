"""Concrete runtimes. `ScriptedRuntime` is the embedded default; the provider runtimes
(`OpenAIRuntime` for OpenAI and every OpenAI-compatible server — Ollama, vLLM, llama.cpp,
LM Studio — and `AnthropicRuntime`), `LlamaCppRuntime` (a GGUF model in process, no key) and
the cassettes (`RecordingRuntime`, `ReplayRuntime`), the cache (`CachedRuntime`) and the batch
path (`BatchRuntime`, what `runtime.batched()` gives) are loaded on
first use, and the SDKs and llama.cpp only when such a runtime is created, so importing this
package stays standard-library-only. See `openprogram.runtimes.providers.openai_runtime` for
pointing `base_url` at a local server."""
from ..base.errors import (
    CacheFileError,
    CassetteExhausted,
    CassetteFileError,
    CassetteMismatch,
    ToolNotRecorded,
)
from ..base.lazy import lazy_names
from ..runtime.runtime import ModelCallError, ModelResponse, Runtime, ToolCall
from ..trace.decision_trace import register_recorded_reader as _register_recorded_reader
from .scripted import ScriptedCall, ScriptedRuntime, ScriptExhausted

_LAZY = {
    "OpenAIRuntime": ".providers.openai_runtime",
    "AnthropicRuntime": ".providers.anthropic_runtime",
    "LlamaCppRuntime": ".llamacpp",
    "RecordingRuntime": ".cassette",
    "ReplayRuntime": ".cassette",
    "CachedRuntime": ".cassette",
    "load_cassette": ".cassette",
    "cassette_traces": ".cassette",
    "cassette_decisions": ".cassette",
    "BatchRuntime": ".providers.batch",
    "CascadeRuntime": ".cascade",
}

__all__ = ["Runtime", "ToolCall", "ModelResponse", "ModelCallError", "ScriptedRuntime",
           "ScriptedCall", "ScriptExhausted", "CassetteMismatch", "CassetteExhausted",
           "CassetteFileError", "CacheFileError", "ToolNotRecorded", *_LAZY]


def _read_cassette(recorded):
    """`decision.revalidate("run.json", ...)`: a path is read as a cassette."""
    import os
    if not isinstance(recorded, (str, os.PathLike)):
        return None
    from .cassette import cassette_traces
    return cassette_traces(recorded)


_register_recorded_reader(_read_cassette)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
