"""`confidence=True` on OpenAIRuntime (issue 35): the request asks for `logprobs` /
`top_logprobs`, the probability of each option is read from the reply the loopback server sends
(streamed and not), equal to the one worked out by hand; a reply whose log-probabilities are
missing or malformed is `other` = 1 with a note; a server that refuses logprobs is negotiated
like any refused form, and samples are drawn in their place only when the user allowed it."""
import math

import pytest
from fakeserver import FAKE_KEY, FakeServer, Reply

from openprogram import DecisionError, decision
from openprogram.runtimes import OpenAIRuntime
from openprogram.runtimes.providers.logprobs import distribution

MENU = {"refund": "REFUND", "refund_partial": "PARTIAL", "escalate": "ESCALATE"}
ln = math.log


def spelled(before: str, name_tokens: list, after: str) -> list:
    """The tokens of a reply: `before` and `after` as certain tokens one character each (the
    server's tokens need not be words), the name's tokens as given."""
    return ([(c, 0.0, []) for c in before] + name_tokens + [(c, 0.0, []) for c in after])


# the name's first token "ref" (0.6) with its alternatives "esc" (0.3) and "hello" (0.05);
# 0.05 is not listed; then "und" (0.9) and the closing quote (1.0)
REFUND = spelled('{"call": "', [("ref", ln(0.6), [("ref", ln(0.6)), ("esc", ln(0.3)),
                                                  ("hello", ln(0.05))]),
                                ("und", ln(0.9), [("und", ln(0.9)), ("und_partial", ln(0.1))])],
                 '"}')
BY_HAND = {"refund": 0.6 * 0.9, "refund_partial": 0.0, "escalate": 0.3}
OTHER_BY_HAND = (0.6 - 0.54) + 0.05 + 0.05  # refund's first token going elsewhere, hello, unlisted


@pytest.fixture
def server():
    with FakeServer("openai") as s:
        yield s


def runtime(fake, **kw):
    return OpenAIRuntime(model="m", base_url=fake.base_url, api_key=FAKE_KEY, max_retries=0,
                         **kw)


@pytest.mark.parametrize("stream", [True, False])
def test_the_distribution_read_from_the_reply_equals_the_one_worked_out_by_hand(server, stream):
    server.push(Reply(text='{"call": "refund"}', logprobs=REFUND))
    rt = runtime(server, stream=stream)
    assert decision.make("Route it.", MENU, runtime=rt, confidence=True) == "REFUND"
    body = server.bodies[-1]
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    conf = decision.last_trace().confidence
    assert conf.source == "logprobs" and conf.pick == "refund"
    for name, p in BY_HAND.items():
        assert conf.probs[name] == pytest.approx(p, abs=1e-9)
    assert conf.other == pytest.approx(OTHER_BY_HAND, abs=1e-9)
    assert sum(conf.probs.values()) + conf.other == pytest.approx(1, abs=1e-6)
    assert conf.runner_up == "escalate" and conf.margin == pytest.approx(0.24)
    assert "several option names" in conf.note  # refund_partial shares refund's first token


def test_json_schema_mode_reads_the_name_under_the_decision_key(server):
    tokens = spelled('{"decision": {"call": "', [
        ("escalate", ln(0.7), [("escalate", ln(0.7)), ("refund", ln(0.2))]),
        ('"', 0.0, [])], ', "args": {}}}')
    text = "".join(t for t, _, _ in tokens)
    server.push(Reply(text=text, logprobs=tokens))
    rt = runtime(server, stream=False, server="openai")
    assert decision.make("Route it.", MENU, runtime=rt, confidence=True,
                         mode="json_schema") == "ESCALATE"
    conf = decision.last_trace().confidence
    assert conf.probs == pytest.approx({"refund": 0.0, "refund_partial": 0.0, "escalate": 0.7})
    # "refund" as a whole first token begins both refund and refund_partial: not told apart
    assert conf.other == pytest.approx(0.3)


# a warning is an error here: the SDK's object holds what the server sent unchecked, and
# writing it into the raw record warned once per value of another type (issue 54, case 21)
@pytest.mark.filterwarnings("error:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("sent", [None, "garbage", {"content": [{"token": 5}]},
                                  [("x", 0.0, [])]])
def test_missing_or_malformed_logprobs_are_other_with_a_note(server, sent):
    server.push(Reply(text='{"call": "refund"}', logprobs=sent))
    rt = runtime(server, stream=False)
    assert decision.make("Route it.", MENU, runtime=rt, confidence=True) == "REFUND"
    conf = decision.last_trace().confidence
    assert conf.source == "logprobs" and conf.other == 1.0
    assert set(conf.probs.values()) == {0.0} and conf.note
    if isinstance(sent, (str, dict)):  # the raw record keeps the field as the server sent it
        raw = decision.last_trace().attempts[0].raw["response"]["choices"][0]["logprobs"]
        assert raw == sent


def test_no_logprobs_are_asked_without_confidence(server):
    server.push(Reply(text='{"call": "refund"}', logprobs=REFUND))
    decision.make("Route it.", MENU, runtime=runtime(server))
    assert "logprobs" not in server.bodies[-1] and decision.last_trace().confidence is None


def test_a_server_that_refuses_logprobs_is_negotiated_and_the_decision_says_so(server):
    server.refuse(lambda body: body.get("logprobs"), 400, "logprobs are not supported")
    server.push(Reply(text='{"call": "refund"}'), Reply(text='{"call": "refund"}'))
    rt = runtime(server)
    with pytest.raises(DecisionError) as info:
        decision.make("Route it.", MENU, runtime=rt, confidence=True)
    err = info.value
    assert err.kind == "no_confidence" and "fallback=True" in str(err)
    assert "logprobs" in err.trace.attempts[-1].error_message
    assert [r["kind"] for r in rt.negotiated] == ["logprobs"]
    assert len(server.requests) == 2  # the refused request, then the same without logprobs
    # remembered: the next request leaves them out at once
    decision.make("Route it.", MENU, runtime=rt)
    assert "logprobs" not in server.bodies[-1] and len(server.requests) == 3


def test_samples_are_drawn_in_their_place_only_when_allowed(server):
    server.refuse(lambda body: body.get("logprobs"), 400, "unsupported parameter: logprobs")
    server.push(*[Reply(text='{"call": "%s"}' % n)
                  for n in ("refund", "escalate", "escalate", "refund")])
    rt = runtime(server)
    assert decision.make("Route it.", MENU, runtime=rt,
                         confidence=decision.Samples(3, fallback=True)) == "ESCALATE"
    conf = decision.last_trace().confidence
    assert (conf.source, conf.n) == ("samples", 3)
    assert conf.probs["escalate"] == pytest.approx(2 / 3)
    # the refused request, the same without logprobs, then the 3 samples in one request (n=3)
    assert len(server.requests) == 3
    samples = server.bodies[-1]
    assert (samples["n"], samples["temperature"]) == (3, 1.0) and "logprobs" not in samples


def test_tools_mode_refuses_confidence_true_and_names_samples(server):
    with pytest.raises(Exception, match="no log-probabilities"):
        decision.make("Route it.", MENU, runtime=runtime(server), confidence=True, mode="tools")
    assert server.requests == []


def test_the_reader_is_bounded_and_never_invents_a_number():
    # a name the model wrote that is off the menu: all of it is other
    tokens = [(c, 0.0, []) for c in '{"call": "'] + [("zzz", ln(0.5), [("zzz", ln(0.5))])] + \
             [('"', 0.0, []), ("}", 0.0, [])]
    d = distribution('{"call": "zzz"}', [{"token": t, "logprob": p, "top_logprobs": [
        {"token": a, "logprob": ap} for a, ap in alts]} for t, p, alts in tokens],
        ["a", "b"])
    assert d["probs"] == {"a": 0.0, "b": 0.0} and d["other"] == pytest.approx(1.0)
    # a positive "log-probability" is refused, not exponentiated
    bad = [{"token": t, "logprob": 3.0 if t == "a" else 0.0, "top_logprobs": []}
           for t in ['{"call": "', "a", '"}']]
    d = distribution('{"call": "a"}', bad, ["a", "b"])
    assert d["other"] == 1.0 and "not a log-probability" in d["note"]


def test_a_flood_of_alternatives_is_read_only_up_to_the_bound():
    from openprogram.runtimes.providers.logprobs import MAX_ALTERNATIVES, tokens_of
    flood = [{"token": "a", "logprob": 0.0,
              "top_logprobs": [{"token": f"t{i}", "logprob": -20.0} for i in range(10_000)]}]
    read = tokens_of(flood)
    assert len(read[0]["top_logprobs"]) == MAX_ALTERNATIVES


def test_only_the_alternatives_of_the_names_first_token_are_read():
    """A streamed reply hands every token's alternatives to `tokens_of`; the distribution needs
    those of the name's first token only, so no other alternative is taken apart (work bound
    by the alternatives of one token, not of the whole reply)."""
    from openprogram.runtimes.providers.logprobs import distribution, tokens_of
    reads = []

    class Alt:  # an SDK object (ChatCompletionTokenLogprob's TopLogprob) that counts reads
        def __init__(self, token, logprob, at):
            self._token, self._logprob, self._at = token, logprob, at

        @property
        def token(self):
            reads.append(self._at)
            return self._token

        @property
        def logprob(self):
            return self._logprob

    pieces = ['{"call": "', "re", "fund", '"}']
    content = [{"token": p, "logprob": -0.1,
                "top_logprobs": [Alt(p, -0.1, i)] + [Alt(f"x{j}", -10.0, i) for j in range(19)]}
               for i, p in enumerate(pieces)]
    content[1]["top_logprobs"][1] = Alt("rep", -3.0, 1)
    d = distribution("".join(pieces), tokens_of(content), ["refund", "reply"])
    # refund: its three tokens through the closing quote; reply: the alternative "rep"
    assert d["probs"]["reply"] == pytest.approx(math.exp(-3.0))
    assert d["probs"]["refund"] == pytest.approx(math.exp(-0.3))
    assert set(reads) == {1} and len(reads) == 20


# -- the pick's name, not the last "call" in the reply (issue 54, case 2) ---------------------

def refund(note: dict):
    """Give the money back."""
    return "REFUNDED"


PICKS = {"refund": refund, "escalate": "ESCALATE", "done": "DONE"}


def certain(text: str) -> list:
    return [(c, 0.0, []) for c in text]


def reply_naming(name: str, p: float, alternative: str, after: str) -> Reply:
    """A reply `{"call": "NAME` + `after`, every token certain but the name's, written at `p`
    with `alternative` at 1 - p."""
    tokens = (certain('{"call": "') +
              [(name, ln(p), [(name, ln(p)), (alternative, ln(1 - p))])] + certain(after))
    return Reply(text="".join(t for t, _, _ in tokens), logprobs=tokens)


def test_the_name_is_read_at_the_pick_not_at_a_call_inside_its_arguments(server):
    # the pick names refund at p = 0.1 (escalate 0.9); its arguments spell {"call": "refund"}
    # with certainty, which the reading took for the pick (p = 1.0, past min_confidence=0.8)
    server.push(reply_naming("refund", 0.1, "escalate", '", "args": {"note": {"call": "refund"}}}'))
    assert decision.make("Route it.", PICKS, runtime=runtime(server, stream=False),
                         confidence=True, min_confidence=0.8,
                         low_confidence="escalate") == "ESCALATE"
    conf = decision.last_trace().confidence
    assert conf.pick == "refund" and conf.p_pick == pytest.approx(0.1)
    assert conf.probs["escalate"] == pytest.approx(0.9)


@pytest.mark.parametrize("stream", [True, False])
def test_a_call_spelled_in_prose_after_the_pick_is_not_read(server, stream):
    server.push(reply_naming("escalate", 0.9, "done",
                             '"}\nWhen it is over I will write "call": "done".'))
    assert decision.make("Route it.", PICKS, runtime=runtime(server, stream=stream),
                         confidence=True, min_confidence=0.8) == "ESCALATE"
    conf = decision.last_trace().confidence
    assert conf.pick == "escalate" and conf.p_pick == pytest.approx(0.9)


def test_a_cascade_asks_on_when_the_pick_itself_is_unsure(server):
    from openprogram.runtimes import CascadeRuntime, ScriptedRuntime
    server.push(reply_naming("refund", 0.1, "escalate", '", "args": {"note": {"call": "refund"}}}'))
    large = ScriptedRuntime(['{"call": "escalate"}'])
    cascade = CascadeRuntime([runtime(server, stream=False), large], min_confidence=0.8)
    assert decision.make("Route it.", PICKS, runtime=cascade) == "ESCALATE"
    stages = decision.last_trace().attempts[0].cascade
    assert [s["pick"] for s in stages] == ["refund", "escalate"]
    assert stages[0]["p_pick"] == pytest.approx(0.1) and not stages[0]["answered"]
    assert len(large.calls) == 1


def test_a_pick_read_by_the_syntax_repair_has_its_name_read_too(server):
    # single quotes: no "call" at all as written; the default repair reads the pick
    tokens = (certain("{'call': '") +
              [("escalate", ln(0.7), [("escalate", ln(0.7)), ("done", ln(0.2))]),
               ("'", 0.0, [])] + certain(", }"))
    text = "".join(t for t, _, _ in tokens)
    server.push(Reply(text=text, logprobs=tokens))
    assert decision.make("Route it.", PICKS, runtime=runtime(server, stream=False),
                         confidence=True) == "ESCALATE"
    conf = decision.last_trace().confidence
    assert conf.p_pick == pytest.approx(0.7) and conf.probs["done"] == pytest.approx(0.2)


# -- a malformed field never fails the reply, p never passes 1 (issue 54, case 13) -------------

@pytest.mark.parametrize("sent", [{"content": 5}, {"content": "abc"},
                                  {"content": [{"token": "x", "logprob": 0.0,
                                                "top_logprobs": 7}]}])
def test_a_malformed_logprobs_field_nobody_asked_for_loses_no_pick(server, sent):
    server.push(Reply(text='{"call": "refund"}', logprobs=sent, logprobs_unasked=True))
    assert decision.make("Route it.", MENU, runtime=runtime(server, stream=False)) == "REFUND"
    assert decision.last_trace().attempts[0].error_kind is None
    # asked for: the pick stands, and the distribution says why it has no numbers
    server.push(Reply(text='{"call": "refund"}', logprobs=sent))
    assert decision.make("Route it.", MENU, runtime=runtime(server, stream=False),
                         confidence=True) == "REFUND"
    conf = decision.last_trace().confidence
    assert conf.other == 1.0 and "malformed" in conf.note


def test_a_logprob_rounded_above_zero_is_a_certain_pick(server):
    tokens = certain('{"call": "') + [("refund", 1e-10, [("refund", 1e-10)])] + certain('"}')
    server.push(Reply(text='{"call": "refund"}', logprobs=tokens))
    assert decision.make("Route it.", MENU, runtime=runtime(server, stream=False),
                         confidence=True) == "REFUND"
    conf = decision.last_trace().confidence
    assert conf.p_pick == 1.0 and "not a probability" not in (conf.note or "")
