"""The exact distribution of LlamaCppRuntime (`complete(..., confidence=[names])`, issue 35) on
the real SmolLM2-135M model, checked against a brute force: for each option name on its own, a
fresh evaluation of the prompt and of every token path that spells the name (under the decision
grammar, with the characters the runtime writes itself written the same way), the name's
probability being the sum over those paths of the product of the model's grammar-renormalised
token probabilities. The brute force reads the grammar and the vocabulary by llama.cpp's own
calls, not through the runtime's tree (`_NameOdds`) or its token index.

Requests go the way the decision loop sends them: `decision.make` on a runtime that adds
`confidence=` to each `complete()` call and keeps the response (the core's `confidence=True`
lands on another branch). Replies depend on the CPU, so the tests assert what must hold for
any reply."""
from __future__ import annotations

import ctypes
import json
import math

import numpy as np
import pytest
from localhelp import TOOL_REQUESTS, TOOLS, tool_prompt

from openprogram import DecisionError, decision
from openprogram.base.errors import ModelCallError
from openprogram.runtimes import LlamaCppRuntime
from openprogram.runtimes.llamacpp import CONFIDENCE_TOLERANCE, MIN_PREFIX_TOKENS, decision_grammar


def refund(reason: str) -> str:
    """Give the customer all of their money back."""
    return f"refunded: {reason}"


def refund_partial(reason: str) -> str:
    """Give the customer part of their money back."""
    return f"refunded in part: {reason}"


def reply(text: str) -> str:
    """Answer the customer's question."""
    return text


def cancel(reason: str) -> str:
    """Cancel the customer's order."""
    return f"cancelled: {reason}"


#: Names that share their first characters, one a prefix of another: told apart by the
#: model's later tokens, `refund` from `refund_partial` by its closing quote. Each takes an
#: argument, so the model draws tokens after the name too (a test reads them back).
REFUNDS = {f.__name__: f for f in (refund, refund_partial, reply)}
#: The same without a common first letter for the runtime to write: `cancel` besides.
REFUND_OR_CANCEL = {f.__name__: f for f in (refund, refund_partial, cancel)}
SHARED = [
    (REFUNDS, "Customer: the shoes arrived broken, I want all my money back."),
    (REFUNDS, "Customer: one of the two shirts was torn; give back half of what I paid."),
    (REFUND_OR_CANCEL, "Customer: please give me a refund for the broken lamp."),
    (REFUND_OR_CANCEL, "Customer: I ordered by mistake, stop the order please."),
]
#: The runtimes here follow the names' spellings until at most this much is left unfollowed,
#: finer than the default (`CONFIDENCE_TOLERANCE`), so the comparisons with the brute force
#: check every name to 1e-4.
FINE = 1e-4
#: Below this a path's mass is not followed by the brute force either.
TINY = 1e-10


class Recorder:
    """A logits processor that changes nothing and keeps the tokens the model had read at each
    token it drew: the prompt, the reply so far, the runtime's own characters included."""

    def __init__(self):
        self.seen: list[list[int]] = []

    def __call__(self, input_ids, scores):
        ids = [int(t) for t in input_ids]
        if not self.seen or ids != self.seen[-1]:  # a grammar's redraw calls it twice
            self.seen.append(ids)
        return scores


class Asking(LlamaCppRuntime):
    """The runtime as the loop calls it, with `confidence=` added and each response kept."""

    def __init__(self, names, **kw):
        kw.setdefault("confidence_tolerance", FINE)
        super().__init__(**kw)
        self.names, self.responses = names, []

    def complete(self, messages, **kw):
        if self.names is not None:
            kw["confidence"] = list(self.names)
        self.responses.append(super().complete(messages, **kw))
        return self.responses[-1]


def _decide(rt, request, options, mode="json_schema"):
    try:
        decision.make(request, options, runtime=rt, mode=mode, max_retries=0)
    except DecisionError:
        pass
    return rt.responses[-1]


# ---------------------------------------------------------------------------------------------
# The brute force
# ---------------------------------------------------------------------------------------------

def _piece(llama, token: int) -> bytes:
    import llama_cpp
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(llama._model.vocab, token, buf, 256, 0, False)
    return buf.raw[:n] if n > 0 else b""


class Brute:
    """Every full name's probability, one name at a time, from the model's own logits.

    llama.cpp's logits for a path depend on how it is split into evaluations (by up to 0.28
    in a logit on this model: `ref` then `und` against `[ref, und]`), so "exact" is exact for
    the model reading the text in the pieces the runtime reads it: the prompt and the reply
    as below, and each name's path one branch of the names' tree at a time, each branch's
    tokens (the one drawn and the characters the runtime writes after it) in one evaluation
    on top of its parent's."""

    def __init__(self, rt, response, names, rec, grammar_text=None):
        self.rt, self.llama = rt, rt.llama
        self.names = names
        chat = response.raw["request"]["messages"]
        self.prompt, _ = rt._model.tokens(chat)
        self.gbnf = grammar_text
        # llama.cpp's logits differ in their last digits between a token read alone and in a
        # batch, so the prompt and the reply are read here in the pieces the runtime read them
        # (after rt.forget()): the shared system message, then the rest of the prompt with the
        # text the runtime writes before the first draw, then a drawn token (with what the
        # runtime writes after it) at a time
        self.head = 0
        if chat[0]["role"] == "system":
            first, _ = rt._model.tokens(chat[:1])
            self.head = _common(first, self.prompt)
            self.head = self.head if self.head >= MIN_PREFIX_TOKENS else 0
        n = len(self.prompt)
        self.cuts = sorted({len(seen) - n for seen in rec.seen if len(seen) >= n})

    def _grammar(self, tokens):
        import llama_cpp
        g = llama_cpp.llama_sampler_init_grammar(self.llama._model.vocab,
                                                 self.gbnf.encode(), b"root")
        for t in tokens:
            llama_cpp.llama_sampler_accept(g, t)
        return g

    def _read(self, reply):
        """The prompt and `reply` read from nothing, in the runtime's pieces."""
        llama = self.llama
        llama.n_tokens = 0
        head, at = self.prompt, 0
        if self.head:
            llama.eval(self.prompt[:self.head])
            head = self.prompt[self.head:]
        for cut in self.cuts:
            if cut >= len(reply):
                break
            llama.eval([*head, *reply[at:cut]])
            head, at = [], cut
        llama.eval([*head, *reply[at:]])

    def _dist(self, reply_path):
        """The model's next-token probabilities from its last read, renormalised over what
        the grammar allows after `reply_path` (when there is a grammar)."""
        import llama_cpp
        from llama_cpp import _internals
        n = self.llama.n_vocab()
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.llama._ctx.ctx, -1),
                                       shape=(n,)).astype(np.float64)
        if self.gbnf is not None:
            g = self._grammar(reply_path)
            arr = _internals.LlamaTokenDataArray(n_vocab=n)
            arr.copy_logits(logits.astype(np.float32))
            llama_cpp.llama_sampler_apply(g, ctypes.byref(arr.candidates))
            llama_cpp.llama_sampler_free(g)
            logits = np.where(np.isfinite(arr.candidates_data.logit), logits, -np.inf)
        p = np.exp(logits - logits.max())
        return p / p.sum()

    def probs_after(self, reply):
        """The next-token probabilities after the prompt and `reply`, read fresh."""
        self._read(reply)
        return self._dist(reply)

    def probability(self, name, prefix_tokens, written: bytes):
        """P(name) and the mass of each token path that spells it, from the state after the
        prompt and the reply's `prefix_tokens` (which wrote `written` of the name)."""
        llama = self.llama
        self._read(prefix_tokens)  # fresh: nothing of another name's work is kept
        base = llama.n_tokens
        spelled = {n: json.dumps(n)[1:].encode() for n in self.names}
        target = spelled[name]
        paths: dict[tuple, float] = {}

        def walk(path, text, mass, piece=()):
            if mass < TINY:
                return
            if piece:  # a branch of the names' tree: its parent's memory, then its own
                # tokens in one evaluation, as the runtime reads them (`_Memory`)
                llama.n_tokens = base + len(path) - len(piece)
                llama.eval(list(piece))
            probs = self._dist([*prefix_tokens, *path])
            for token in np.flatnonzero(probs > 0):
                grown = text + _piece(llama, int(token))
                if not (target.startswith(grown) or grown.startswith(target)) or \
                        grown == text:
                    continue
                m = mass * float(probs[token])
                live = [n for n, s in spelled.items()
                        if s.startswith(grown) or grown.startswith(s)]
                if grown.startswith(target) or live == [name] and self.gbnf is not None:
                    paths[(*path, int(token))] = m  # written whole, or the grammar ends it
                    continue
                forced = []
                if self.gbnf is not None:  # the runtime writes what every live name shares
                    rest = [spelled[n][len(grown):] for n in live]
                    common = bytes(_common_prefix(rest))
                    if common:
                        forced = llama.tokenize(common, add_bos=False, special=False)
                        grown += common
                        if grown.startswith(target):
                            paths[(*path, int(token), *forced)] = m
                            continue
                walk([*path, int(token), *forced], grown, m, [int(token), *forced])

        walk([], written, 1.0)
        return sum(paths.values()), paths


def _common(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _common_prefix(items):
    out = bytearray()
    for chars in zip(*items):
        if len(set(chars)) != 1:
            break
        out.append(chars[0])
    return out


def _json_case(options, request, seed=0, temperature=0.0):
    """A json_schema decision with the distribution, the tokens the model had read at each
    draw, and the brute force over the grammar the runtime used."""
    from openprogram.runtimes.llamacpp import bounded_schema
    rec = Recorder()
    rt = Asking(list(options), seed=seed, temperature=temperature, logits_processor=[rec])
    rt.forget()  # the prompt read in known pieces (see Brute)
    resp = _decide(rt, request, options)
    schema = resp.raw["request"]["response_format"]["schema"]
    brute = Brute(rt, resp, list(options), rec,
                  decision_grammar(bounded_schema(schema), compact=True))
    return rt, resp, rec, brute


def _branch(rt, rec, brute, opening: bytes):
    """The reply's tokens before the draw at which the name is written (the first draw after
    the "call" value's opening quote), what of the name they wrote, and the tokens the model
    drew for the name from there (each with the tokens read before it)."""
    n = len(brute.prompt)
    for i, seen in enumerate(rec.seen):
        reply = seen[n:]
        text = b"".join(_piece(rt.llama, t) for t in reply)
        at = text.find(opening)
        if at >= 0:
            return reply, text[at + len(opening):], i
    raise AssertionError("the reply never opened a call value")


# ---------------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("options,request_", SHARED)
def test_names_sharing_their_first_tokens_get_their_brute_force_probabilities(options,
                                                                              request_):
    """`refund`, `refund_partial` and a third name: each name's probability under the grammar
    equals the brute force's (every full spelling, one name at a time, fresh evaluations),
    `refund`'s ending being its closing quote; the distribution sums to 1."""
    rt, resp, rec, brute = _json_case(options, request_)
    conf = resp.confidence
    assert conf["source"] == "exact" and conf["note"] is None
    assert list(conf["probs"]) == list(options)
    assert math.isclose(sum(conf["probs"].values()) + conf["other"], 1.0, abs_tol=1e-6)
    # the grammar lets nothing but a name be written here: other is only the mass of the
    # spellings the runtime left unfollowed (confidence_tolerance), which bounds the error
    work = resp.raw["response"]["confidence_work"]
    assert conf["other"] == pytest.approx(work["unfollowed"], abs=1e-12)
    assert work["unfollowed"] <= FINE
    prefix, written, _ = _branch(rt, rec, brute, b'"call":"')
    for name in options:
        expected, paths = brute.probability(name, prefix, written)
        assert expected - work["unfollowed"] - 1e-9 <= conf["probs"][name] <= expected + 1e-9, \
            (name, conf, expected, paths)
    # refund and refund_partial share their first token: the tree read more tokens for them
    # (and no more than the names' own), never the prompt again
    assert 1 <= work["evaluations"] <= 6 * len(options) + 8
    assert 1 <= work["batches"] <= work["evaluations"]
    longest = max(len(rt.llama.tokenize(json.dumps(n).encode(), add_bos=False))
                  for n in options)
    assert work["tokens"] <= work["evaluations"] * (longest + 1) < len(brute.prompt)


#: Six names that all begin with "re": a names' tree several branches wide at each depth.
RE_NAMES = {"refund": "give all the money back", "refund_partial": "give part of it back",
            "refund_status": "say where a refund stands", "reset_password": "send a reset link",
            "report_damage": "record a damaged item", "reply": "answer a question"}


def test_branches_are_read_together_each_on_top_of_its_parents_memory(monkeypatch):
    """The names' branches waiting at one depth are read in one model evaluation, and a branch
    keeps the model's memory of its path for its children, so a child reads only the tokens it
    adds: fewer model evaluations than branches, and fewer tokens per branch than with every
    path read again from the reply, one branch at a time (no sequence to keep it in,
    `TREE_SEQUENCES = 0`); the same distribution, up to the mass each leaves unfollowed (the
    two stop at different branches)."""
    from openprogram.runtimes.llamacpp import confidence
    request = "Customer: has my refund gone through yet?"
    got = []
    for sequences in (confidence.TREE_SEQUENCES, 0):
        monkeypatch.setattr(confidence, "TREE_SEQUENCES", sequences)
        rt = Asking(list(RE_NAMES), seed=0, temperature=0.0)
        rt.forget()
        resp = _decide(rt, request, RE_NAMES)
        got.append((resp.confidence, resp.raw["response"]["confidence_work"], resp.text))
    (kept, work, text), (again, work_again, text_again) = got
    assert text == text_again
    assert 1 <= work["batches"] < work["evaluations"]
    # read again, a path is one model evaluation per piece of it
    assert work_again["batches"] > work_again["evaluations"] >= 2
    assert work["tokens"] / work["evaluations"] < work_again["tokens"] / work_again["evaluations"]
    slack = max(work["unfollowed"], work_again["unfollowed"]) + 1e-12
    for name in RE_NAMES:
        assert abs(kept["probs"][name] - again["probs"][name]) <= slack, (name, got)
    assert math.isclose(sum(kept["probs"].values()) + kept["other"], 1.0, abs_tol=1e-6)


def test_a_branch_that_gave_its_memory_up_is_read_again_in_the_same_pieces(monkeypatch):
    """With one sequence for the names' branches, a branch gives its memory up when another
    needs the sequence, and its children read its path again from the nearest branch that
    still has one (the reply), piece by piece: more tokens read, and still each name's
    brute-force probability to 1e-9."""
    from openprogram.runtimes.llamacpp import confidence
    options, request_ = RE_NAMES, "Customer: has my refund gone through yet?"
    rt, resp, rec, brute = _json_case(options, request_)
    roomy = resp.raw["response"]["confidence_work"]
    monkeypatch.setattr(confidence, "TREE_SEQUENCES", 1)
    rt, resp, rec, brute = _json_case(options, request_)
    work = resp.raw["response"]["confidence_work"]
    assert work["evaluations"] >= roomy["evaluations"] and work["tokens"] > roomy["tokens"]
    prefix, written, _ = _branch(rt, rec, brute, b'"call":"')
    for name in options:
        expected, paths = brute.probability(name, prefix, written)
        assert expected - work["unfollowed"] - 1e-9 <= resp.confidence["probs"][name] \
            <= expected + 1e-9, (name, resp.confidence, expected, paths)


def test_the_picks_probability_is_the_product_over_the_tokens_it_wrote_plus_its_other_spellings():
    """The tokens the model drew for its name (the runtime's own characters having
    probability 1): the product of their grammar-renormalised probabilities is the mass of
    the path written, and the pick's probability is that plus the mass of the name's other
    spellings (`ref`+`und` against `refund`), each computed by the brute force."""
    options, request = REFUND_OR_CANCEL, SHARED[2][1]
    rt, resp, rec, brute = _json_case(options, request)
    pick = json.loads(resp.text)["decision"]["call"]
    prefix, written, at = _branch(rt, rec, brute, b'"call":"')
    n, start = len(brute.prompt), len(brute.prompt) + len(prefix)
    spelled = {o: json.dumps(o)[1:].encode() for o in options}
    product, k = 1.0, at
    while True:  # draw by draw until one name is left
        before, after = rec.seen[k], rec.seen[k + 1]
        token = after[len(before)]
        product *= float(brute.probs_after(before[n:])[token])
        path = after[start:len(before) + 1]
        text = written + b"".join(_piece(rt.llama, t) for t in path)
        live = [o for o, s in spelled.items() if s.startswith(text) or text.startswith(s)]
        if len(live) == 1:
            break
        k += 1
    assert live == [pick]
    total, paths = brute.probability(pick, prefix, written)
    assert tuple(path) in paths, (path, paths)
    assert product == pytest.approx(paths[tuple(path)], rel=1e-6)
    others = sum(m for p, m in paths.items() if p != tuple(path))
    left = resp.raw["response"]["confidence_work"]["unfollowed"]
    assert product + others - left - 1e-9 <= resp.confidence["probs"][pick] \
        <= product + others + 1e-9


def test_where_no_two_names_share_a_first_token_the_greedy_pick_is_the_most_probable():
    """Four tools whose names begin with different tokens, at temperature 0: the model's pick
    is the option of highest probability, and no token beyond the reply was read."""
    llama = LlamaCppRuntime().llama
    firsts = {llama.tokenize(name.encode(), add_bos=False)[0] for name in TOOLS}
    assert len(firsts) == len(TOOLS)
    rt = Asking(list(TOOLS), temperature=0.0, seed=3)
    for request, _ in TOOL_REQUESTS[:6]:
        resp = _decide(rt, tool_prompt(request), TOOLS)
        conf = resp.confidence
        pick = json.loads(resp.text)["decision"]["call"]
        assert max(conf["probs"], key=conf["probs"].get) == pick, (request, conf)
        assert math.isclose(sum(conf["probs"].values()) + conf["other"], 1.0, abs_tol=1e-6)
        assert resp.raw["response"]["confidence_work"] == {"evaluations": 0, "batches": 0,
                                                           "tokens": 0, "unfollowed": 0.0}


def test_the_distribution_leaves_the_reply_as_it_was():
    """Asking for the distribution reads branches of the names and cuts the model's memory
    back: with the same seed, the reply (sampled at temperature 0.8) is the same text."""
    for seed in range(3):
        options, request = SHARED[seed]
        replies = []
        for names in (None, list(options)):
            rt = Asking(names, seed=seed, temperature=0.8)
            rt.forget()  # both read the prompt the same way
            resp = _decide(rt, request, options)
            replies.append(resp.text)
            assert (resp.confidence is None) == (names is None)
        assert replies[0] == replies[1]



def test_the_reply_takes_the_trees_read_of_the_token_it_drew_and_writes_the_same_text(
        monkeypatch):
    """The branch of the token the reply drew is read by the tree; the reply goes on from that
    read (its cells and its logits) instead of reading the same piece again: it reads fewer
    tokens itself, and the text is the same as without the distribution."""
    import llama_cpp
    read: list[int] = []
    evaluate = llama_cpp.Llama.eval

    def counted(self, tokens):
        read.append(len(tokens))
        return evaluate(self, tokens)

    monkeypatch.setattr(llama_cpp.Llama, "eval", counted)
    taken = 0
    for seed in range(4):
        options, request = SHARED[seed]
        replies, tokens = [], []
        for names in (None, list(options)):
            rt = Asking(names, seed=seed, temperature=0.8)
            rt.forget()  # both read the prompt the same way
            read.clear()
            resp = _decide(rt, request, options)
            replies.append(resp.text)
            tokens.append(sum(read))
        assert replies[0] == replies[1], seed
        saved = tokens[0] - tokens[1]
        assert saved >= 0, (seed, tokens)
        taken += saved > 0
    assert taken >= 1  # (seed 2 draws `ref`, whose branch the tree reads)


@pytest.mark.parametrize("bad", [0, 1, -0.1, True, "1e-3", None])
def test_confidence_tolerance_is_a_probability_between_0_and_1(bad):
    with pytest.raises(ValueError, match="confidence_tolerance must be a number between 0 and 1"):
        LlamaCppRuntime(confidence_tolerance=bad)


def test_a_coarser_tolerance_reads_fewer_branches_and_leaves_at_most_that_much_unfollowed():
    """Each name's probability is at most the unfollowed mass below its exact value, whatever
    the tolerance: the default's and a coarser one's agree with a fine one's within their
    unfollowed mass, and read fewer branches."""
    options, request = SHARED[0]
    got = {}
    for tolerance in (FINE, CONFIDENCE_TOLERANCE, 1e-2):
        rt = Asking(list(options), temperature=0.0, seed=0, confidence_tolerance=tolerance)
        resp = _decide(rt, request, options)
        work = resp.raw["response"]["confidence_work"]
        assert work["unfollowed"] <= tolerance
        got[tolerance] = (resp.confidence, work)
    fine, fine_work = got[FINE]
    assert got[1e-2][1]["evaluations"] < fine_work["evaluations"]
    for tolerance in (CONFIDENCE_TOLERANCE, 1e-2):
        conf, work = got[tolerance]
        assert work["evaluations"] <= fine_work["evaluations"]
        slack = max(fine_work["unfollowed"], work["unfollowed"]) + 1e-9
        for name in options:
            assert abs(conf["probs"][name] - fine["probs"][name]) <= slack, (tolerance, name)

# -- menu mode ---------------------------------------------------------------------------------

MENU = ('Options (reply with one JSON object that picks exactly one, as in its "Call:" line):'
        '\n\n- refund()\n  give the money back\n  Call: {"call": "refund"}'
        '\n\n- refund_partial()\n  give part of the money back\n  Call: {"call": "refund_partial"}'
        '\n\n- reply()\n  answer the question\n  Call: {"call": "reply"}')
#: A menu-mode conversation after which this model writes a pick (one earlier turn shows the
#: form: alone, the 135M model mostly writes prose in menu mode).
MENU_CHAT = [{"role": "user", "content": "Customer: where is my parcel?\n\n" + MENU},
             {"role": "assistant", "content": '{"call": "reply"}'},
             {"role": "user", "content": "Customer: the shoes were broken, I want all my "
                                         "money back.\n\n" + MENU}]


def test_menu_mode_gives_each_name_its_probability_at_the_call_value():
    """No grammar: at the "call" value every name is followed to its closing quote, what names
    no option is `other`, and each name's probability is the brute force's (full softmax)."""
    rec = Recorder()
    rt = LlamaCppRuntime(temperature=0.0, seed=0, max_tokens=40, logits_processor=[rec],
                         confidence_tolerance=FINE)
    rt.forget()  # the prompt read in known pieces (see Brute)
    names = list(REFUNDS)
    resp = rt.complete(MENU_CHAT, confidence=names)
    conf = resp.confidence
    assert '"call"' in resp.text, resp.text
    assert conf["source"] == "exact"
    assert math.isclose(sum(conf["probs"].values()) + conf["other"], 1.0, abs_tol=1e-6)
    assert conf["other"] > 0  # without a grammar some mass leaves the names
    brute = Brute(rt, resp, names, rec)
    prefix, written, _ = _branch(rt, rec, brute, b'"call": "')
    assert written == b""  # the quote ended a token: the tree starts at the name
    left = resp.raw["response"]["confidence_work"]["unfollowed"]
    assert conf["note"] is None and left <= FINE
    for name in names:
        expected, _ = brute.probability(name, prefix, b"")
        assert expected - left - 1e-9 <= conf["probs"][name] <= expected + 1e-9, \
            (name, conf, expected)
    pick = json.loads(resp.text[resp.text.index("{"):resp.text.index("}") + 1])["call"]
    assert max(conf["probs"], key=conf["probs"].get) == pick


def test_a_reply_that_names_no_option_is_all_other_with_a_note():
    """Menu mode, a reply cut before any "call" value: every name 0, other 1, and why."""
    rt = LlamaCppRuntime(temperature=0.0, seed=0, max_tokens=2)
    resp = rt.complete([{"role": "user", "content": "Say hello."}], confidence=["a", "b"])
    assert resp.confidence == {"probs": {"a": 0.0, "b": 0.0}, "other": 1.0,
                               "source": "exact",
                               "note": 'the reply wrote no "call" value, so it named no option'}


@pytest.mark.parametrize("bad", ["refund", [], [""], [1, 2], {"refund": 1}])
def test_confidence_takes_a_list_of_names(bad):
    rt = LlamaCppRuntime(max_tokens=4)
    with pytest.raises(ModelCallError, match="non-empty list of strings"):
        rt.complete([{"role": "user", "content": "hi"}], confidence=bad)


def test_the_runtime_says_it_gives_the_exact_distribution():
    assert LlamaCppRuntime.confidence_source == "exact"


def test_a_single_option_is_certain_and_acomplete_gives_the_same_distribution():
    """One option: the runtime writes its whole name itself, so it has probability 1 at no
    evaluation. acomplete() (the loop's async path) carries `confidence=` as complete() does:
    the same request at temperature 0 gets the same distribution."""
    import asyncio
    rt = Asking(["refund"], temperature=0.0, seed=0)
    resp = _decide(rt, SHARED[0][1], {"refund": refund})
    assert resp.confidence == {"probs": {"refund": 1.0}, "other": 0.0, "source": "exact",
                               "note": None}
    assert resp.raw["response"]["confidence_work"]["evaluations"] == 0

    rt = Asking(list(REFUND_OR_CANCEL), temperature=0.0, seed=0)
    sync = _decide(rt, SHARED[2][1], REFUND_OR_CANCEL)
    # the schema the loop sent, with the request alone as the conversation
    fmt = {"name": "decision", "schema": sync.raw["request"]["response_format"]["schema"]}
    messages = [{"role": "user", "content": SHARED[2][1]}]
    rt.forget()
    first = rt.complete(messages, response_format=fmt, confidence=list(REFUND_OR_CANCEL))
    rt.forget()
    second = asyncio.run(rt.acomplete(messages, response_format=fmt,
                                      confidence=list(REFUND_OR_CANCEL)))
    assert second.text == first.text
    assert second.confidence == first.confidence
    assert math.isclose(sum(first.confidence["probs"].values()) + first.confidence["other"],
                        1.0, abs_tol=1e-6)


# -- samples (decision.Samples) ------------------------------------------------------------------

def _sampled(rt, samples):
    """The n responses a decision with `confidence=samples` drew, and the decision's trace."""
    decision.make(SHARED[0][1], REFUNDS, runtime=rt, mode="json_schema", confidence=samples,
                  max_retries=0)
    return rt.responses[-samples.n:], decision.last_trace()


def test_samples_are_drawn_at_their_temperature_each_with_a_seed_of_its_own():
    """decision.Samples passes each call its temperature and its index: the local model draws
    sample i at that temperature with the runtime's seed + i, so the samples differ (at 1.5)
    and a second run draws the same ones again."""
    runs = []
    for _ in range(2):
        rt = Asking(None, seed=7, temperature=0.0, max_tokens=40)
        got, trace = _sampled(rt, decision.Samples(4, temperature=1.5))
        requests = [r.raw["request"] for r in got]
        assert [q["temperature"] for q in requests] == [1.5] * 4
        assert [q["seed"] for q in requests] == [7, 8, 9, 10]
        assert [q["sample"] for q in requests] == [0, 1, 2, 3]
        assert trace.confidence.source == "samples" and trace.confidence.n == 4
        runs.append([r.text for r in got])
    assert len(set(runs[0])) > 1, runs[0]  # a runtime at temperature 0 would write one reply
    assert runs[0] == runs[1]


def test_samples_at_temperature_zero_are_one_reply_whatever_the_runtimes_temperature():
    """The samples' temperature, not the runtime's, is the one drawn at: at 0 every sample is
    the model's greedy reply although each has its own seed and the runtime says 1.5."""
    rt = Asking(None, seed=3, temperature=1.5, max_tokens=40)
    got, trace = _sampled(rt, decision.Samples(3, temperature=0.0))
    assert [r.raw["request"]["seed"] for r in got] == [3, 4, 5]
    assert len({r.text for r in got}) == 1
    assert max(trace.confidence.probs.values()) == 1.0


@pytest.mark.parametrize("kw, match", [({"temperature": -1}, "temperature= must be"),
                                       ({"temperature": "hot"}, "temperature= must be"),
                                       ({"sample": -1}, "sample= must be"),
                                       ({"sample": True}, "sample= must be")])
def test_a_samples_temperature_and_index_are_checked(kw, match):
    rt = LlamaCppRuntime(max_tokens=4)
    with pytest.raises(ModelCallError, match=match):
        rt.complete([{"role": "user", "content": "hi"}], **kw)
