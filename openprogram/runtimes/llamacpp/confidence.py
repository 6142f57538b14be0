"""How sure the model was, exactly: the probability the model gives each option's whole name
where its reply writes the name (`_NameOdds`), read from its own logits under the decision's
grammar, following the tokens of names that share a beginning until they are told apart, with
every token's bytes indexed (`_Pieces`) to find the tokens that could write a name."""
from __future__ import annotations

import contextlib
import ctypes
import json
import re
from typing import Any

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
#: The branches of the names' tree the model reads in one batch, each as a sequence of its
#: own beside the reply's (a loaded model is made with this many more sequences). A batch of
#: a few tokens costs the model about what one token does, so reading the branches waiting at
#: one depth together costs about one evaluation, not one each; llama.cpp gives each branch's
#: tokens the same logits, to the last digit, as when that branch is read alone.
TREE_SEQUENCES = 16


@contextlib.contextmanager
def tree_sequences() -> Any:
    """While a model is loaded in it: its context made with `TREE_SEQUENCES` sequences more
    than the reply's one, in one memory they share (`kv_unified`, so the context is not split
    between them). llama-cpp-python's `Llama` takes neither setting, so the defaults it
    starts from are changed for the time of the load (under the loading lock). A
    llama-cpp-python without a shared memory leaves the context as it was, and the branches
    are read one at a time."""
    from llama_cpp import llama_cpp as low
    made = low.llama_context_default_params
    if not any(field[0] == "kv_unified" for field in low.llama_context_params._fields_):
        yield
        return

    def params() -> Any:
        p = made()
        p.n_seq_max, p.kv_unified = TREE_SEQUENCES + 1, True
        return p

    low.llama_context_default_params = params
    try:
        yield
    finally:
        low.llama_context_default_params = made


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
    cut back to it afterwards), so the extra cost is the names' tokens only. The branches
    waiting at one depth are read in one model evaluation, each in a sequence of its own
    (`TREE_SEQUENCES`): where names share their first tokens, a few evaluations rather than
    one per branch (benchmarks/bench_confidence.py)."""

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
        self.evals = self.read = 0  # branches the model read, and their tokens
        self.batches = 0  # the model evaluations those took (branches read together)
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

        def follow(here: float, text: bytes, path: list[int], state: Any,
                   logits: Any) -> float:
            """One branch, its tokens read (`logits`: the model's after them): its children
            placed on a name or on the heap; returns the branch's mass that goes to other."""
            nonlocal order, waiting
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

        together = self._together()
        room = min(llama.n_ctx() - base, llama.n_batch)  # tokens one batch may add
        taken: list = []
        try:
            while heap:
                if waiting <= CONFIDENCE_TOLERANCE or self.evals >= budget:
                    self.cut = self.evals >= budget and waiting > CONFIDENCE_TOLERANCE
                    unfollowed = sum(-item[0] for item in heap)
                    break
                # the branches to read now: heaviest first, as many as are needed (until
                # what is left waiting is within the tolerance) and fit in one batch
                size = 0
                while heap and waiting > CONFIDENCE_TOLERANCE and len(taken) < together and \
                        self.evals + sum(1 for t in taken if t[3]) < budget and \
                        (not taken or size + len(heap[0][3]) <= room):
                    taken.append(heapq.heappop(heap))
                    waiting += taken[-1][0]
                    size += len(taken[-1][3])
                read = [t[3] for t in taken if t[3]]
                got = iter(self._read(read, base, n_vocab)) if read else iter(())
                for neg, _, text, path, state in taken:
                    other += follow(-neg, text, path, state,
                                    next(got) if path else root_logits)
                for item in taken:
                    if item[4] is not None:
                        llama_cpp.llama_sampler_free(item[4])
                taken = []
        finally:
            for item in [*heap, *taken]:
                if item[4] is not None:
                    llama_cpp.llama_sampler_free(item[4])
            llama.n_tokens = base  # the model's memory is cut back to the reply so far
        self._finish(mass, other, unfollowed)

    def _together(self) -> int:
        """How many branches one model evaluation reads: `TREE_SEQUENCES` when the loaded
        model has the sequences for them (`tree_sequences`), else one."""
        import llama_cpp
        ctx = self.model.llama._ctx.ctx
        return max(1, min(TREE_SEQUENCES, llama_cpp.llama_n_seq_max(ctx) - 1))

    def _read(self, paths: list[list[int]], base: int, n_vocab: int) -> list[Any]:
        """The model's logits after each branch's tokens, read from the reply so far (the
        model's memory up to `base`, sequence 0). One branch is read in the reply's own
        sequence and cut back after; several are read in one batch, each in a sequence of
        its own that starts as a copy of the reply's (llama.cpp shares those cells, it does
        not copy them) and is dropped after."""
        import llama_cpp
        import numpy as np
        llama = self.model.llama
        ctx = llama._ctx.ctx
        self.evals += len(paths)
        self.read += sum(len(p) for p in paths)
        self.batches += 1
        if len(paths) == 1:
            llama.n_tokens = base
            llama.eval(paths[0])
            return [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1),
                                          shape=(n_vocab,))]
        memory = llama_cpp.llama_get_memory(ctx)
        total = sum(len(p) for p in paths)
        batch = llama_cpp.llama_batch_init(total, 0, 1)
        try:
            k, last = 0, []
            for seq, path in enumerate(paths, 1):
                llama_cpp.llama_memory_seq_cp(memory, 0, seq, 0, base)
                for j, token in enumerate(path):
                    batch.token[k], batch.pos[k] = token, base + j
                    batch.n_seq_id[k], batch.seq_id[k][0] = 1, seq
                    batch.logits[k] = j == len(path) - 1
                    k += 1
                last.append(k - 1)
            batch.n_tokens = k
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode could not read the branches of the names")
            return [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i),
                                          shape=(n_vocab,)).copy() for i in last]
        finally:
            for seq in range(1, len(paths) + 1):
                llama_cpp.llama_memory_seq_rm(memory, seq, -1, -1)
            llama_cpp.llama_batch_free(batch)

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
