"""What makes the local model fast, asserted by counting work (tokens read, reused, written;
grammar rules), never by a clock: the shared prefix of an evaluation is read once, a menu
reply stops at its pick, the json_schema grammar is small, the settings come from the machine.
On the real SmolLM2-135M model, like the other local tests."""
from __future__ import annotations

import json

import jsonschema
import llama_cpp
import pytest
from localhelp import OPTIONS, TOOL_REQUESTS, TOOLS, grammar_rules, prompt, tool_prompt

from openprogram import DecisionError, decision
from openprogram.decision.modes import decision_schema
from openprogram.decision.options import normalize
from openprogram.runtimes import LlamaCppRuntime
from openprogram.runtimes.llamacpp import (
    SCHEMA_INSTRUCTION,
    STRING_MAX_LENGTH,
    _PrefixStates,
    _Sampler,
    bounded_schema,
    decision_grammar,
    machine_settings,
    schema_brief,
)
from openprogram.trace.view import trace_html


def _decide(rt, request, mode, options=TOOLS, **kw):
    try:
        decision.make(tool_prompt(request), options, runtime=rt, mode=mode, **kw)
    except DecisionError as exc:
        return exc.trace
    return decision.last_trace()


def _prefix_tokens(rt, att) -> int:
    """The tokens of the system message every decision on this option set shares."""
    system = att.raw["request"]["messages"][:1]
    assert system[0]["role"] == "system"
    tokens, _ = rt._model.tokens(system)
    full, _ = rt._model.tokens(att.raw["request"]["messages"])
    n = 0
    while n < len(tokens) and tokens[n] == full[n]:
        n += 1
    return n


def _prompt_evals(rt) -> int:
    """Prompt tokens llama.cpp itself has read (in batches) on this context so far."""
    return llama_cpp.llama_perf_context(rt.llama.ctx).n_p_eval


@pytest.mark.parametrize("mode", ["json_schema", "menu"])
def test_the_second_decision_reads_fewer_prompt_tokens_by_at_least_the_shared_prefix(mode):
    # fast_forward off: the reply tokens it writes are read in batches, which llama.cpp's
    # counter adds to the prompt's (test_the_runtime_writes_what_the_schema_fixes counts them)
    rt = LlamaCppRuntime(seed=0, max_tokens=48, fast_forward=False)
    rt.forget()
    counts = []
    for request, _ in TOOL_REQUESTS[:2]:
        before = _prompt_evals(rt)
        trace = _decide(rt, request, mode, max_retries=0)
        (att,) = trace.attempts
        counts.append((att, _prompt_evals(rt) - before))
    (first, read1), (second, read2) = counts
    shared = _prefix_tokens(rt, second)
    assert shared > 300  # the menu, or the schema: most of the prompt
    assert first.usage["reused_input_tokens"] == 0
    assert second.usage["reused_input_tokens"] >= shared
    # what the trace says was read is what llama.cpp read, by its own counter (which leaves
    # out one token of the first decode after the context's memory was cleared)
    assert read2 == second.usage["input_tokens"] - second.usage["reused_input_tokens"]
    assert first.usage["input_tokens"] - 1 <= read1 <= first.usage["input_tokens"]
    # fewer by at least the shared prefix, the two rows' own lengths aside
    grew = second.usage["input_tokens"] - first.usage["input_tokens"]
    assert read2 <= read1 - shared + grew + 1
    html = trace_html(trace)
    assert f"({second.usage['reused_input_tokens']} reused)" in html
    if mode == "menu":
        assert "Laid out by the runtime: menu_first" in html


def test_a_saved_prefix_comes_back_after_another_option_set_used_the_model():
    """The model's memory holds one prompt at a time; the state of a prefix it read is saved
    and restored, so alternating option sets does not read either menu again."""
    rt = LlamaCppRuntime(seed=0, max_tokens=24)
    rt.forget()
    model = rt._model
    first = _decide(rt, TOOL_REQUESTS[0][0], "menu", max_retries=0).attempts[0]
    other = _decide(rt, "Thanks, bye!", "menu", options=OPTIONS, max_retries=0).attempts[0]
    assert other.usage["reused_input_tokens"] < 40  # another menu: only the template's start
    before = _prompt_evals(rt)
    again = _decide(rt, TOOL_REQUESTS[1][0], "menu", max_retries=0).attempts[0]
    shared = _prefix_tokens(rt, again)
    assert model.prefixes.restored >= 1 and len(model.prefixes.states) == 2
    assert again.usage["reused_input_tokens"] >= shared
    assert _prompt_evals(rt) - before == again.usage["input_tokens"] - shared
    assert first.usage["reused_input_tokens"] == 0


def test_saved_prefixes_are_bounded_in_bytes_least_recently_used_first():
    states = _PrefixStates(max_bytes=100)
    states.put((1,), b"a" * 40)
    states.put((2,), b"b" * 40)
    assert states.get((1,)) is not None  # (1,) is now the most recently used
    states.put((3,), b"c" * 40)
    assert list(states.states) == [(1,), (3,)] and states.bytes == 80
    states.put((4,), b"d" * 101)  # larger than the bound: not kept at all
    assert (4,) not in states.states and states.bytes <= 100


class Writes:
    """A logits processor that makes the real model write `text`, token by token, then go on
    with `then` until stopped (the end token banned): a reply of a known shape, streamed by
    llama.cpp's own generation loop. The 135M model rarely writes a menu pick by itself."""

    def __init__(self, llama, text: str, then: str = ""):
        self.tokens = llama.tokenize(text.encode(), add_bos=False)
        self.then = llama.tokenize(then.encode(), add_bos=False) if then else []
        self.step = 0

    def __call__(self, input_ids, scores):
        seq = self.tokens + self.then * 100
        scores[:] = -1e30
        scores[seq[min(self.step, len(seq) - 1)]] = 0.0
        self.step += 1
        return scores


PICK = ('Sure. {"call": "open_ticket", "args": {"summary": "charged twice", '
        '"category": "billing", "priority": "urgent"}}')
AFTER = " I hope this helps; the ticket will be handled by a person soon, have a nice day!"


def _tokens_after(rt, att) -> int:
    rest = att.reply[att.span[1]:]
    return len(rt.llama.tokenize(rest.encode(), add_bos=False)) if rest else 0


def test_a_menu_reply_stops_within_16_tokens_of_its_picks_closing_brace():
    llama = LlamaCppRuntime().llama
    forced = Writes(llama, PICK, AFTER)
    rt = LlamaCppRuntime(seed=0, max_tokens=200, logits_processor=[forced])
    trace = _decide(rt, TOOL_REQUESTS[3][0], "menu", max_retries=0)
    (att,) = trace.attempts
    assert trace.status == "resolved" and att.chosen == "open_ticket"
    assert att.finish_reason == "stop" and att.reply.endswith("}}")
    assert _tokens_after(rt, att) <= 16
    assert att.usage["output_tokens"] == len(forced.tokens) < 200
    # turned off, the same reply runs on until max_tokens
    forced = Writes(llama, PICK, AFTER)
    rt = LlamaCppRuntime(seed=0, max_tokens=200, logits_processor=[forced],
                         stop_at_pick=False)
    (full,) = _decide(rt, TOOL_REQUESTS[3][0], "menu", max_retries=0).attempts
    assert full.reply.startswith(att.reply) and full.finish_reason == "length"
    assert full.usage["output_tokens"] == 200 and _tokens_after(rt, full) > 100


def test_a_reply_that_never_closes_its_pick_still_ends_truncated():
    llama = LlamaCppRuntime().llama
    forced = Writes(llama, '{"call": "open_ticket", "args": {"summary": "', "and more ")
    rt = LlamaCppRuntime(seed=0, max_tokens=40, logits_processor=[forced])
    (att,) = _decide(rt, TOOL_REQUESTS[3][0], "menu", max_retries=0).attempts
    assert att.finish_reason == "length" and att.error_kind == "truncated"
    assert att.usage["output_tokens"] == 40


def test_menu_replies_of_the_model_itself_stop_at_their_pick_when_they_write_one():
    """Unforced: whatever the model writes, a reply never holds more than 16 tokens after a
    pick (most of its replies hold none: then they are prose cut at max_tokens)."""
    rt = LlamaCppRuntime(max_tokens=64, temperature=0.8)
    for seed in range(6):
        rt.seed = seed
        (att,) = _decide(rt, TOOL_REQUESTS[seed][0], "menu", max_retries=0).attempts
        if att.span is not None:
            assert _tokens_after(rt, att) <= 16 and att.finish_reason == "stop"
        else:
            assert att.finish_reason in ("stop", "length")


def test_the_grammar_of_a_4_option_set_has_fewer_rules_than_the_whole_schema_grammar():
    from llama_cpp.llama_grammar import json_schema_to_gbnf
    schema = decision_schema(normalize(TOOLS))
    assert len(schema["properties"]["decision"]["anyOf"]) == 4
    old = json_schema_to_gbnf(json.dumps(bounded_schema(schema, 200)))
    new = decision_grammar(bounded_schema(schema))
    assert grammar_rules(new) * 4 < grammar_rules(old), (grammar_rules(new), grammar_rules(old))
    # the name comes first, then only that option's arguments; one rule per string bound
    root = next(line for line in new.splitlines() if line.startswith("root ::="))
    assert root.index('"\\"call\\""') < root.index("pick0")
    assert new.count(f"string-max{STRING_MAX_LENGTH} ::=") == 1
    pick0 = next(line for line in new.splitlines() if line.startswith("pick0 ::="))
    assert '"\\"search_flights\\""' in pick0 and "args0" in pick0


def test_constrained_replies_under_the_new_grammar_follow_the_schema():
    """jsonschema as the oracle: every reply written under the grammar is an instance of the
    bounded schema it was made from (its strings within the bound)."""
    rt = LlamaCppRuntime(seed=0, temperature=0.8)
    for seed, (request, _) in enumerate(TOOL_REQUESTS[:8]):
        rt.seed = seed
        for att in _decide(rt, request, "json_schema").attempts:
            schema = att.raw["request"]["response_format"]["schema"]
            jsonschema.validate(json.loads(att.reply), schema)
            assert att.finish_reason == "stop"


def test_settings_come_from_the_machine_and_the_model_and_can_be_overridden():
    machine = machine_settings()
    assert machine["n_threads"] >= 1 and machine["n_batch"] == 512
    rt = LlamaCppRuntime()
    assert rt.n_threads == machine["n_threads"] and rt.n_batch == 512
    assert rt.n_ctx == 4096 and rt.llama.n_ctx() == 4096  # SmolLM2 trained on 8192: capped
    own = LlamaCppRuntime(n_ctx=1024, n_threads=1, n_batch=64)
    assert own.llama is not rt.llama
    assert own.llama.n_ctx() == 1024 and own.llama.n_batch == 64
    assert own.llama.context_params.n_threads == 1
    with pytest.raises(ValueError, match="n_batch must be a whole number >= 1"):
        LlamaCppRuntime(n_batch=0)
    with pytest.raises(ValueError, match="layout must be one of 'menu_first', 'as_sent'"):
        LlamaCppRuntime(layout="menu_last")
    with pytest.raises(TypeError, match="does not take 'logprobs'"):
        LlamaCppRuntime(logprobs=3)


def test_the_as_sent_layout_sends_the_decision_as_the_specification_writes_it():
    rt = LlamaCppRuntime(seed=0, max_tokens=16, layout="as_sent")
    trace = _decide(rt, TOOL_REQUESTS[0][0], "menu", max_retries=0)
    (att,) = trace.attempts
    sent = att.raw["request"]
    assert sent["layout"] == "as_sent"
    assert [m["role"] for m in sent["messages"]] == ["user"]
    assert sent["messages"][0]["content"] == att.prompt == \
        tool_prompt(TOOL_REQUESTS[0][0]) + "\n\n" + trace.menu
    assert "Laid out by the runtime" not in trace_html(trace)
    # a plain call (no menu in it) goes as sent in either layout
    plain = LlamaCppRuntime(seed=0, max_tokens=4).complete([{"role": "user",
                                                             "content": prompt("Hi")}])
    assert plain.raw["request"]["layout"] == "as_sent"


def test_the_grammar_filters_the_whole_vocabulary_only_for_tokens_it_refused_at_first():
    """Grammar last (`_GrammarLast`): each token is drawn from the model's own odds and only
    that token is checked; the 49,152-token vocabulary goes through the grammar just for the
    tokens it refused, which the trace counts. Off, every token is filtered (none counted)."""
    rt = LlamaCppRuntime(seed=0)
    written = redraws = 0
    for request, _ in TOOL_REQUESTS[:4]:
        for att in _decide(rt, request, "json_schema").attempts:
            jsonschema.validate(json.loads(att.reply),
                                att.raw["request"]["response_format"]["schema"])
            written += att.usage["output_tokens"]
            redraws += att.raw["response"]["grammar_redraws"]
    assert 0 <= redraws < written / 2, (redraws, written)
    assert "_init_sampler" not in vars(rt.llama)   # the shadow is gone after each generation
    first = LlamaCppRuntime(seed=0, grammar_last=False)
    att = _decide(first, TOOL_REQUESTS[0][0], "json_schema").attempts[0]
    assert "grammar_redraws" not in att.raw["response"]
    jsonschema.validate(json.loads(att.reply), att.raw["request"]["response_format"]["schema"])


def test_the_brief_schema_form_names_every_option_argument_and_choice_in_fewer_tokens():
    """`schema_in_prompt="brief"`: the model reads one line per option instead of the JSON
    Schema — every option, what it does, every argument with its type, its description and '?'
    when it may be left out, every enum value — in fewer prompt tokens; the grammar, made from
    the same schema, is unchanged, so every reply still follows it."""
    schema = decision_schema(normalize(TOOLS))
    brief = schema_brief(schema)
    lines = brief.splitlines()
    assert len(lines) == 1 + len(TOOLS)
    book = next(line for line in lines if line.startswith("- book_room("))
    # (the type names the menu and the messages use: int, str, float, ...)
    assert book.startswith("- book_room(city: str (the city of the hotel), check_in: str")
    assert "guests?: int (number of guests)" in book and "nights: int" in book
    assert book.endswith("): Book a hotel room for a stay.")
    assert '"changed_plans"|"illness"|"price"|"other"' in brief
    for alt in schema["properties"]["decision"]["anyOf"]:
        for key in alt["properties"]["args"]["properties"]:
            assert f"{key}:" in brief or f"{key}?:" in brief

    rts = {form: LlamaCppRuntime(seed=0, max_tokens=300, schema_in_prompt=form)
           for form in ("json", "brief")}
    atts = {}
    for form, rt in rts.items():
        rt.forget()
        (atts[form],) = _decide(rt, TOOL_REQUESTS[1][0], "json_schema", max_retries=0).attempts
    sent = {form: att.raw["request"]["messages"][0]["content"] for form, att in atts.items()}
    assert sent["brief"] == brief and sent["json"].startswith(SCHEMA_INSTRUCTION)
    read = {form: att.usage["input_tokens"] for form, att in atts.items()}
    assert read["brief"] < read["json"] * 0.7
    assert atts["brief"].raw["request"]["response_format"] == \
        atts["json"].raw["request"]["response_format"]
    assert atts["brief"].finish_reason == "stop"
    jsonschema.validate(json.loads(atts["brief"].reply),
                        atts["brief"].raw["request"]["response_format"]["schema"])


def test_a_schema_that_is_not_a_decisions_is_shown_as_json_in_the_brief_form():
    """exec(response_format=...) asks for the object itself: no options to list."""
    assert schema_brief({"type": "object", "properties": {"city": {"type": "string"}}}) is None
    with pytest.raises(ValueError, match=r"schema_in_prompt must be one of 'brief', 'json'"):
        LlamaCppRuntime(schema_in_prompt="short")
    for not_a_form in (1, 1.0, None):   # equal to True or False, but not a yes or a no
        with pytest.raises(ValueError, match=rf"got {not_a_form}$"):
            LlamaCppRuntime(schema_in_prompt=not_a_form)


def test_the_sampler_forces_exactly_the_characters_the_grammar_allows_alone():
    """`_Sampler.forced`: under the compact grammar of the 4-tool set, the characters nothing
    but the schema decides — the wrapper, the rest of a name its first letters told apart, the
    required keys, the closing braces — and not one more; under the grammar with optional
    spaces, only what comes before the first place a space may go."""
    from llama_cpp.llama_grammar import LlamaGrammar
    rt = LlamaCppRuntime(seed=0)
    llama = rt.llama
    schema = bounded_schema(decision_schema(normalize(TOOLS)))

    def sampler(compact):
        grammar = LlamaGrammar.from_string(decision_grammar(schema, compact=compact),
                                           verbose=False)
        return _Sampler(llama, llama._init_sampler(temp=0.2), grammar,
                        probe=rt._model.probe)

    def write(s, text):  # as if the model had drawn these tokens
        s.take(llama.tokenize(text, add_bos=False, special=False))

    def force(s, limit=100):  # as the runtime does: find, then give the grammar the tokens
        fixed = s.forced(limit)
        assert s.forced(limit) == fixed      # finding takes nothing into the grammar
        write(s, fixed)
        return fixed

    s = sampler(compact=True)
    try:
        assert force(s) == b'{"decision":{"call":"'
        assert force(s) == b""               # the name's first letters are the model's
        write(s, b"cancel")
        assert force(s) == b'_booking","args":{"booking_id":"'
        write(s, b'AB12CD"')
        assert force(s) == b',"reason":"'    # required, so no choice of key
        write(s, b"ill")
        assert force(s, 3) == b"nes"         # bounded by the caller
        assert force(s) == b's"'             # then "}" or ",\"refund\"": the model's
        write(s, b"}")
        assert force(s) == b"}}"             # and then only the end of the text
        assert force(s) == b""
    finally:
        s.close()
    spaced = sampler(compact=False)
    try:
        assert spaced.forced(100) == b"{"
    finally:
        spaced.close()


def test_the_runtime_writes_what_the_schema_fixes_and_the_model_the_rest():
    """In json_schema mode the forced characters are the runtime's: the model reads them in a
    batch with the token it drew before them, so it decodes one token at a time for fewer than
    half the tokens of a reply; the reply is compact JSON that follows the schema, and with
    fast_forward=False the model writes every token itself (spaces allowed)."""
    rt = LlamaCppRuntime(seed=0)
    for request, _ in TOOL_REQUESTS[:4]:
        before = llama_cpp.llama_perf_context(rt.llama.ctx).n_eval
        (att,) = _decide(rt, request, "json_schema", max_retries=0).attempts
        one_at_a_time = llama_cpp.llama_perf_context(rt.llama.ctx).n_eval - before
        written, forced = att.usage["output_tokens"], att.raw["response"]["forced_tokens"]
        assert att.reply.startswith('{"decision":{"call":"') and ": " not in att.reply[:40]
        jsonschema.validate(json.loads(att.reply),
                            att.raw["request"]["response_format"]["schema"])
        assert written / 3 < forced < written
        assert one_at_a_time <= written - forced < written / 2 + 5, (one_at_a_time, written,
                                                                     forced)
    off = LlamaCppRuntime(seed=0, fast_forward=False)
    (att,) = _decide(off, TOOL_REQUESTS[0][0], "json_schema", max_retries=0).attempts
    assert "forced_tokens" not in att.raw["response"]
    jsonschema.validate(json.loads(att.reply), att.raw["request"]["response_format"]["schema"])
