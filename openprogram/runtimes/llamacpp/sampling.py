"""How a `LlamaCppRuntime` generation draws its tokens and when its reply stops: `_Sampler` (the
chain of llama.cpp's sampling settings with the grammar applied last, and the characters the grammar
allows alone, which the runtime writes itself), the request options that are llama.cpp's sampling
settings, `logit_bias=` as a logits processor, the stop texts, and the checks that a reply already
holds its pick. Apart from runtime.py because these are the per-token pieces the generation loop
calls, each self-contained; the loop itself, which ties them to the loaded model's state, stays
in runtime.py.
"""
from __future__ import annotations

import ctypes
import json
from typing import Any

from ...decision.extract import find_action
from ...runtime.runtime import ModelCallError

# What a request may set besides the runtime's own settings: llama.cpp's sampling parameters
# (as llama-cpp-python's `create_chat_completion` names them), stop texts, and logit changes.
_SAMPLING = {"top_p": "top_p", "top_k": "top_k", "min_p": "min_p", "typical_p": "typical_p",
             "repeat_penalty": "repeat_penalty", "frequency_penalty": "frequency_penalty",
             "presence_penalty": "presence_penalty", "tfs_z": "tfs_z",
             "mirostat_mode": "mirostat_mode", "mirostat_tau": "mirostat_tau",
             "mirostat_eta": "mirostat_eta"}


_OPTIONS = set(_SAMPLING) | {"stop", "logit_bias", "logits_processor"}


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
        if not self.grammar:   # llama.cpp could not parse it: it would draw with none, unsaid
            raise ModelCallError(
                "llama.cpp could not read the grammar made from the option set's JSON Schema "
                "(it printed why above), and would have written with no grammar at all; use "
                "mode='menu' for this option set, and report the option names it has",
                kind="model_error")
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


def _as_list(stop: Any) -> list[str]:
    return [stop] if isinstance(stop, str) else list(stop or [])


def _first_stop(text: str, stops: list[str], since: int) -> int | None:
    """Where the first stop text in `text` begins, looking only where a new piece could have
    completed one."""
    found = [at for s in stops if (at := text.find(s, max(since, 0))) >= 0]
    return min(found) if found else None


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
