"""How sure the model was, exactly: the probability the model gives each option's whole name
where its reply writes the name (`_NameOdds`), read from its own logits under the decision's
grammar, following the tokens of names that share a beginning until they are told apart, with
every token's bytes indexed (`_Pieces`) to find the tokens that could write a name. It is long
because the reading of the name's odds, the index of token pieces and the prefix states they share
are one computation over the same model state, kept together so each step sees the others'."""
from __future__ import annotations

import contextlib
import ctypes
import json
import re
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    # LlamaCppRuntime and _Sampler (runtime.py) and _Loaded (models.py) in annotations, never
    # imported, not even here: those modules import this one, and
    # tests/package/test_core_layers.py counts an import for annotations as a cycle
    LlamaCppRuntime = _Sampler = _Loaded = Any

#: Where the name of a pick begins: just after the opening quote of its "call" value.
_CALL_VALUE = re.compile(r'"call"\s*:\s*"')
#: How far a name's probability may be from its exact value by default (a runtime's
#: `confidence_tolerance=`): the branches of the names' tree are followed heaviest first until
#: those left carry no more than this in all; their mass is counted in `other`
#: (`attempt.raw["response"]["confidence_work"]["unfollowed"]`). 0.003 is below what the
#: distribution is read for (a bar, a 0.1-wide calibration bin, a threshold, a mean over a
#: table's rows) and reads about 40 % fewer branches than 1e-4 at 20 options whose
#: names share their first tokens (benchmarks/bench_confidence.py --tolerance 1e-4).
CONFIDENCE_TOLERANCE = 3e-3
#: The model evaluations one distribution may make besides the reply's own: this many per
#: option name, plus `_EXTRA_EVALS` (names that differ in their first token need none); when
#: they run out first, the note says how much was left unfollowed.
CONFIDENCE_EVALS_PER_NAME = 6
_EXTRA_EVALS = 8
#: The branches of the names' tree whose memory the model keeps at once, each in a sequence
#: of its own beside the reply's (a loaded model is made with this many more sequences). A
#: branch keeps its sequence while its children wait, so a child reads only the tokens it adds
#: (its piece: the token drawn and the characters the runtime writes after it), not its whole
#: path from the reply again. The distribution is exact for the model reading each name's
#: tokens in those pieces: llama.cpp's logits for a path depend on how it is split into
#: evaluations (by up to 0.28 in a logit on the bundled model, `ref` then `und` against
#: `[ref, und]`). The branches waiting at one depth are read in one model evaluation, which
#: costs about what one token does. What the model computes for a branch must not depend on
#: which other branches are read with it or were read before: the model runs with flash
#: attention (which adds up only a token's own sequence's cells, in the order of the cells),
#: and no cell is freed until the tree is done (a dropped branch's cells go to a sequence of
#: their own), so a child's cells always come after its parent's. Without both, a logit moved
#: by up to 0.59 with the other branches' cells.
TREE_SEQUENCES = 16


@contextlib.contextmanager
def tree_sequences() -> Any:
    """While a model is loaded in it: its context made with `TREE_SEQUENCES` sequences more
    than the reply's one (and one for the cells of dropped branches), in one memory they share
    (`kv_unified`, so the context is not split between them). llama-cpp-python's `Llama` takes
    neither setting, so the defaults it starts from are changed for the time of the load (under the
    loading lock). A llama-cpp-python without a shared memory leaves the context as it was, and
    every branch is read again from the reply."""
    from llama_cpp import llama_cpp as low
    made = low.llama_context_default_params
    if not any(field[0] == "kv_unified" for field in low.llama_context_params._fields_):
        yield
        return

    def params() -> Any:
        p = made()
        p.n_seq_max, p.kv_unified = TREE_SEQUENCES + 2, True  # + the reply's, the dropped
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


class _Branch:
    """A branch of the names' tree: the tokens it adds to its parent's (`piece`, read in one
    model evaluation), how many tokens it is from the tree's root, the sequence that holds the
    model's memory after it (None when it has none), and how many of its children wait."""
    __slots__ = ("parent", "piece", "length", "seq", "waiting")

    def __init__(self, parent: _Branch | None, piece: list[int]):
        self.parent, self.piece = parent, piece
        self.length = (parent.length if parent is not None else 0) + len(piece)
        self.seq: int | None = None
        self.waiting = 0


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

    Branches are followed most probable first until those left carry at most the runtime's
    `confidence_tolerance` (counted in `other`), within `CONFIDENCE_EVALS_PER_NAME` evaluations
    per name; the prompt is never read again (the tree starts from the model's memory and is
    cut back to it afterwards), so the extra cost is the names' tokens only, each read once:
    a branch keeps the model's memory of its path for its children, and the branches waiting
    at one depth are read in one model evaluation (`TREE_SEQUENCES`, `_Memory`;
    benchmarks/bench_confidence.py)."""

    def __init__(self, runtime: LlamaCppRuntime, model: _Loaded, names: list[str],
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
        self.batches = 0  # the model evaluations those took
        self.unfollowed, self.cut = 0.0, False  # mass left unfollowed; by the budget?
        #: the branch of the token the reply drew, when the tree read it: (its piece, the
        #: logits after it). Its cells stay in the reply's memory, so the reply takes this
        #: read as its own next one instead of reading the same piece again (`take_kept`).
        self.kept: tuple[list[int], Any] | None = None

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
    def compute(self, sampler: _Sampler, grammar: Any, written: bytes,
                context: bytes, drawn: int | None = None) -> None:
        """Follow the names' tree from the model's present memory (`grammar`: a copy of the
        grammar's state there, or None; freed here), and keep the distribution in `result`.
        `drawn`: the token the reply drew there; when its branch is read, the read is kept for
        the reply (`kept`)."""
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
        tolerance = self.runtime.confidence_tolerance
        root_logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1), shape=(n_vocab,)).copy()
        # branches to follow: (-mass, order, text from the root, the branch, grammar)
        root = _Branch(None, [])
        root.seq = 0  # the reply's own memory, up to `base`
        heap: list = [(-1.0, 0, b"", root, grammar)] if targets else []
        order, waiting = 1, 1.0 if targets else 0.0  # waiting: the mass on the heap
        if not targets and grammar is not None:
            llama_cpp.llama_sampler_free(grammar)

        def follow(here: float, text: bytes, node: _Branch, state: Any,
                   logits: Any) -> float:
            """One branch, its tokens read (`logits`: the model's after them): its children
            placed on a name or on the heap; returns the branch's mass that goes to other."""
            nonlocal order, waiting, mine
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
                branch = _Branch(node, [token, *forced])
                if node is root and token == drawn:
                    mine = branch
                heapq.heappush(heap, (-here * p, order, grown, branch, child))
                node.waiting += 1
                order += 1
                waiting += here * p
                placed += p
            return here * max(universe - placed, 0.0)

        mine: _Branch | None = None  # the drawn token's branch
        memory = _Memory(self, base, n_vocab)
        together = max(1, memory.count)
        room = min(llama.n_ctx() - base, llama.n_batch) - 1  # tokens one batch may add
        taken: list = []
        try:
            while heap:
                if waiting <= tolerance or self.evals >= budget:
                    self.cut = self.evals >= budget and waiting > tolerance
                    unfollowed = sum(-item[0] for item in heap)
                    break
                # the branches to read now: heaviest first, as many as are needed (until
                # what is left waiting is within the tolerance) and fit in one batch
                size = 0
                while heap and waiting > tolerance and len(taken) < together and \
                        self.evals + sum(1 for t in taken if t[3].piece) < budget and \
                        (not taken or size + len(heap[0][3].piece) <= room):
                    taken.append(heapq.heappop(heap))
                    waiting += taken[-1][0]
                    size += len(taken[-1][3].piece)
                read = [t[3] for t in taken if t[3].piece]
                if mine is not None and mine in read:
                    # the drawn token's branch first: its cells then come right after the
                    # reply's, so the reply's next ones follow them once the tree's other
                    # cells are freed (flash attention adds a sequence's cells up in the
                    # order they sit in memory; out of order, the sums round otherwise)
                    read.remove(mine)
                    read.insert(0, mine)
                got = dict(zip(map(id, read), memory.read(read))) if read else {}
                for neg, _, text, node, state in taken:
                    logits = got[id(node)] if node.piece else root_logits
                    if node is mine and memory.keep(node):
                        self.kept = (list(node.piece), logits)
                    other += follow(-neg, text, node, state, logits)
                    if node.piece:
                        memory.done(node)
                for item in taken:
                    if item[4] is not None:
                        llama_cpp.llama_sampler_free(item[4])
                taken = []
        finally:
            for item in [*heap, *taken]:
                if item[4] is not None:
                    llama_cpp.llama_sampler_free(item[4])
            memory.close()
            llama.n_tokens = base  # the model's memory is cut back to the reply so far
        self._finish(mass, other, unfollowed)

    def take_kept(self, pending: list[int]) -> bool:
        """Whether the reply's next read (`pending`: the token it drew and the characters the
        runtime wrote after it) is the branch the tree read for that token: then the model's
        memory holds it already (`_Memory.keep`), its logits are put where the reply draws
        from, and the reply does not read the same piece again. Otherwise the reply reads as
        usual, and its read drops the kept cells (llama-cpp-python's `eval` first cuts the
        memory at `n_tokens`)."""
        import llama_cpp
        import numpy as np
        kept, self.kept = self.kept, None
        if kept is None:
            return False
        llama = self.model.llama
        piece, logits = kept
        out = llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1) if pending == piece else None
        if not out:
            return False
        np.ctypeslib.as_array(out, shape=(len(logits),))[:] = logits
        n = llama.n_tokens
        llama.input_ids[n:n + len(piece)] = piece
        llama.n_tokens = n + len(piece)
        return True

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

    def _grown(self, sampler: _Sampler, state: Any, token: int) -> tuple[Any, list[int]]:
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


class _Memory:
    """The model's memory for the names' tree: the sequences beside the reply's (at most
    `TREE_SEQUENCES`, as many as the loaded model has, `tree_sequences`), each holding one
    branch read. A branch whose children wait keeps its sequence, and a child reads only its
    own piece on top of it (the last child takes the sequence over; the others share its cells,
    llama.cpp does not copy them). When every sequence is held, the oldest is given up, and a
    child of a branch that lost its sequence is read again from the nearest branch that has
    one, piece by piece, so every path is read in the same pieces whatever the order. With no
    sequence beside the reply's, each branch is read in the reply's, piece by piece from the
    reply, and cut back after."""

    def __init__(self, odds: _NameOdds, base: int, n_vocab: int):
        import llama_cpp
        self.odds, self.base, self.n_vocab = odds, base, n_vocab
        self.ctx = odds.model.llama._ctx.ctx
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        seqs = llama_cpp.llama_n_seq_max(self.ctx)
        #: where the cells of dropped branches wait until the tree is done (TREE_SEQUENCES)
        self.spare = seqs - 1 if seqs > 1 else None
        self.count = max(0, min(TREE_SEQUENCES, seqs - 2))
        self.free = list(range(self.count, 0, -1))
        self.held: list[_Branch] = []  # branches keeping their sequence, oldest first
        self.kept = 0  # the tokens after `base` the reply's sequence keeps (`keep`)

    def read(self, nodes: list[_Branch]) -> list[Any]:
        """The model's logits after each branch's path (their pieces in one batch)."""
        import llama_cpp
        import numpy as np
        self.odds.evals += len(nodes)
        if not self.count:  # only the reply's sequence
            out = []
            for node in nodes:
                for piece in self._chain(node):
                    self._decode([(piece, 0)])
                out.append(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, -1),
                                                 shape=(self.n_vocab,)).copy())
                self._bury(0, self.base)
            return out
        for node in nodes:
            self._place(node)
        last = self._decode([(node, node.seq) for node in nodes])
        return [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, i),
                                      shape=(self.n_vocab,)).copy() for i in last]

    def done(self, node: _Branch) -> None:
        """After a branch's children are placed: its sequence kept for them, or given back."""
        if node.seq is None:
            return
        if node.waiting:
            self.held.append(node)
        else:
            self._drop(node)

    def keep(self, node: _Branch) -> bool:
        """The cells of a branch just read (a child of the root, in a sequence of its own)
        also the reply's: the reply goes on from them (`_NameOdds.kept`). Other branches do
        not see them (they attend to their own sequence's cells only)."""
        import llama_cpp
        if node.seq is None or node.parent.piece:
            return False
        llama_cpp.llama_memory_seq_cp(self.mem, node.seq, 0, self.base,
                                      self.base + len(node.piece))
        self.kept = len(node.piece)
        return True

    def close(self) -> None:
        import llama_cpp
        for node in self.held:
            node.seq = None
        llama_cpp.llama_memory_seq_rm(self.mem, 0, self.base + self.kept, -1)
        for seq in range(1, self.count + 1):
            llama_cpp.llama_memory_seq_rm(self.mem, seq, -1, -1)
        if self.spare is not None:
            llama_cpp.llama_memory_seq_rm(self.mem, self.spare, -1, -1)

    def _place(self, node: _Branch) -> None:
        """A sequence for `node` holding its parent's path (read again if it must be)."""
        import llama_cpp
        parent = node.parent
        parent.waiting -= 1
        if parent.seq and not parent.waiting:  # the last child takes its parent's over
            node.seq, parent.seq = parent.seq, None
            self.held.remove(parent)
            return
        if not self.free:  # give up the oldest branch's memory (not the reply's)
            self._drop(self.held[0])
        node.seq = self.free.pop()
        from_, missing = node.parent, []
        while from_.seq is None:
            missing.append(from_)
            from_ = from_.parent
        llama_cpp.llama_memory_seq_cp(self.mem, from_.seq, node.seq, 0,
                                      self.base + from_.length)
        for ancestor in reversed(missing):
            self._decode([(ancestor, node.seq)], logits=False)

    def _chain(self, node: _Branch) -> list[_Branch]:
        """The branches from the root's first child down to `node`."""
        chain = []
        while node.piece:
            chain.append(node)
            node = node.parent
        return chain[::-1]

    def _bury(self, seq: int, start: int = -1) -> None:
        """A sequence's cells (from position `start`) taken from it but kept in the spare
        sequence: a freed cell would be taken by the next token read, before its parent's."""
        import llama_cpp
        if self.spare is not None:
            llama_cpp.llama_memory_seq_cp(self.mem, seq, self.spare, start, -1)
        llama_cpp.llama_memory_seq_rm(self.mem, seq, start, -1)

    def _drop(self, node: _Branch) -> None:
        self._bury(node.seq)
        self.free.append(node.seq)
        node.seq = None
        if node in self.held:
            self.held.remove(node)

    def _decode(self, pieces: list[tuple[_Branch, int]], logits: bool = True) -> list[int]:
        """One model evaluation of each branch's piece in its sequence, after its parent's
        path; the batch indices of their last tokens."""
        import llama_cpp
        total = sum(len(node.piece) for node, _ in pieces)
        batch = llama_cpp.llama_batch_init(total, 0, 1)
        try:
            k, last = 0, []
            for node, seq in pieces:
                at = self.base + node.parent.length
                for j, token in enumerate(node.piece):
                    batch.token[k], batch.pos[k] = token, at + j
                    batch.n_seq_id[k], batch.seq_id[k][0] = 1, seq
                    batch.logits[k] = logits and j == len(node.piece) - 1
                    k += 1
                last.append(k - 1)
            batch.n_tokens = k
            status = llama_cpp.llama_decode(self.ctx, batch)
            if status == 1 and self.spare is not None:  # no room left: free the dropped cells
                llama_cpp.llama_memory_seq_rm(self.mem, self.spare, -1, -1)
                status = llama_cpp.llama_decode(self.ctx, batch)
            if status != 0:
                raise RuntimeError("llama_decode could not read the branches of the names")
        finally:
            llama_cpp.llama_batch_free(batch)
        self.odds.read += total
        self.odds.batches += 1
        return last
