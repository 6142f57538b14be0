"""The local model's speed: what a decision costs on it, first and in the rows of an evaluation.

Runs SmolLM2-135M-Instruct in process (LlamaCppRuntime, the bundled file) on a tool set as
public ones are written (4 functions, 3-6 described parameters each,
tests/runtimes/llamacpp/localhelp.py) and prints, from one run on this machine:
- the machine's load average (other work on the same cores slows the model a lot) and the
  settings chosen from the machine (threads, batch, context);
- the model's writing speed (tokens/s of a fixed-length reply);
- per way of asking and layout, over the rows of one evaluation (fresh model memory before the
  first row): seconds per decision, first row and rows 2..N (median, worst); prompt tokens
  read vs reused from the model's memory; tokens written per decision, how many of them the
  runtime wrote (the characters the schema fixes, read by the model in batches) and, in menu
  mode, past the pick's closing brace; the parse rate (attempts whose reply held a pick) and
  right picks;
- references from the same run, and the ratios: the schema shown to the model as JSON instead
  of the brief form (the default), the tool set with its docstrings removed (the schema as it
  was before each pick carried its option's description), `fast_forward=False` (the model
  writes every token, spaces allowed), json_schema with `reuse_prefix=False,
  stop_at_pick=False` (every prompt read whole, the reply not stopped at its pick), the text
  menu laid out as sent (the request before the menu, so no prefix is shared);
- the json_schema grammar: rules in llama.cpp's converter's grammar of the whole schema with
  200-character strings (the old grammar) and in this runtime's, and the time per written
  token under each, with the grammar applied to the whole vocabulary first (llama-cpp-python)
  and checked last (this runtime), and a json_schema evaluation with the grammar first.

Needs the `local` extra (./dev test installs it):

    .venv/bin/python benchmarks/bench_local.py [--rows 20] [--menu-rows N] [--only json_schema]
                                                [--threads N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import types
from pathlib import Path

from openprogram import DecisionError, decision
from openprogram.decision.modes import decision_schema
from openprogram.decision.options import normalize
from openprogram.runtimes import LlamaCppRuntime
from openprogram.runtimes.llamacpp import (
    _Sampler,
    bounded_schema,
    decision_grammar,
    machine_settings,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "local"))
from localhelp import TOOL_REQUESTS, TOOLS, grammar_rules, tool_prompt  # noqa: E402

UNPARSED = {"no_action", "bad_args", "truncated", "not_text"}
#: `--threads N`: every runtime of the run on N threads (None: from the machine, as by default).
THREADS: int | None = None


def local_model(**settings) -> LlamaCppRuntime:
    if THREADS is not None:
        settings.setdefault("n_threads", THREADS)
    return LlamaCppRuntime(**settings)


def undescribed(fn):
    """`fn` without its docstring: its option has no description (its parameters keep theirs)."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__, copy.__annotations__ = fn.__kwdefaults__, fn.__annotations__
    copy.__doc__ = None
    return copy


#: The tool set as the schema showed it before the options' descriptions went into it.
UNDESCRIBED = {name: undescribed(fn) for name, fn in TOOLS.items()}


def load() -> str:
    return "load %.2f" % os.getloadavg()[0]


def writing_speed(tokens: int = 128) -> float:
    """Tokens/s while writing (the prompt excluded), from a fixed-length reply."""
    probe = local_model()
    llama = probe.llama
    ends = {llama.token_eos()} | set(llama.tokenize(b"<|im_end|>", add_bos=False, special=True))
    rt = local_model(max_tokens=tokens, seed=0, logit_bias={i: -1e4 for i in ends})
    reply = rt.complete([{"role": "user", "content": "Tell me about the mountains."}])
    timings = reply.raw["response"]["timings"]
    return (reply.usage["output_tokens"] - 1) / (timings["total_s"] - timings["first_token_s"])


def past_pick(rt: LlamaCppRuntime, att) -> int | None:
    """Tokens the reply holds after the end of the pick the decision read (None: no pick)."""
    if att.span is None or not isinstance(att.reply, str):
        return None
    rest = att.reply[att.span[1]:]
    return len(rt.llama.tokenize(rest.encode(), add_bos=False, special=False)) if rest else 0


def evaluation(mode: str, rows: int, options=TOOLS, **settings) -> dict:
    """Rows 1..rows of one evaluation on one runtime, the model's memory emptied first."""
    rt = local_model(seed=0, **settings)
    rt.forget()
    out = []
    for request, want in TOOL_REQUESTS[:rows]:
        t0 = time.perf_counter()
        try:
            decision.make(tool_prompt(request), options, runtime=rt, mode=mode)
            trace = decision.last_trace()
        except DecisionError as exc:
            trace = exc.trace
        seconds = time.perf_counter() - t0
        atts = trace.attempts
        used = [a.usage or {} for a in atts]
        out.append({
            "s": seconds, "attempts": len(atts),
            "read": sum(u.get("input_tokens", 0) - u.get("reused_input_tokens", 0)
                        for u in used),
            "reused": sum(u.get("reused_input_tokens", 0) for u in used),
            "written": sum(u.get("output_tokens", 0) for u in used),
            "forced": sum((a.raw or {}).get("response", {}).get("forced_tokens", 0)
                          for a in atts),
            "past": [p for a in atts if (p := past_pick(rt, a)) is not None],
            "parsed": sum(a.error_kind not in UNPARSED for a in atts),
            "right": trace.status == "resolved" and atts[-1].chosen == want,
            "finish": [a.finish_reason for a in atts],
            "layout": atts[0].raw["request"]["layout"] if atts[0].raw else None})
    return {"rows": out, "load": load()}


def summary(name: str, r: dict) -> str:
    rows = r["rows"]
    first, later = rows[0], rows[1:]
    s_later = [x["s"] for x in later] or [float("nan")]
    attempts = sum(x["attempts"] for x in rows)
    parsed = sum(x["parsed"] for x in rows)
    past = [p for x in rows for p in x["past"]]
    return (f"{name:<34} {first['s']:>6.2f} {statistics.median(s_later):>7.2f} "
            f"{max(s_later):>6.2f} {first['read']:>6}/{first['reused']:<5} "
            f"{statistics.median([x['read'] for x in later] or [0]):>6.0f}/"
            f"{statistics.median([x['reused'] for x in later] or [0]):<5.0f} "
            f"{statistics.median([x['written'] for x in rows]):>5.0f}/"
            f"{max(x['written'] for x in rows):<4} "
            f"{statistics.median([x['forced'] for x in rows]):>6.0f} "
            f"{(max(past) if past else '-')!s:>5} {parsed / attempts:>6.0%} "
            f"{sum(x['right'] for x in rows):>3}/{len(rows):<3} {r['load']}")


def grammar_cost(tokens: int = 48) -> list[str]:
    """Rules and seconds per written token of the old and the new json_schema grammar, on the
    same prompt and seed (the same model memory: the prompt is read once before)."""
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf
    schema = decision_schema(normalize(TOOLS))
    old = json_schema_to_gbnf(json.dumps(bounded_schema(schema, 200)))
    new = decision_grammar(bounded_schema(schema))
    rt = local_model(seed=0)
    llama = rt.llama
    prompt = llama.tokenize(b"<|im_start|>user\nPick a tool.<|im_end|>\n<|im_start|>assistant\n",
                            add_bos=False, special=True)
    lines = []
    for name, gbnf, last in (("converter, whole schema, 200-char strings", old, False),
                             ("decision_grammar, grammar first", new, False),
                             ("decision_grammar, grammar last (this runtime)", new, True),
                             ("no grammar", None, False)):
        grammar = LlamaGrammar.from_string(gbnf, verbose=False) if gbnf else None
        llama.set_seed(0)
        llama.n_tokens = 0
        llama.eval(prompt)  # the prompt is read; time the writing only
        sampler = _Sampler(llama, llama._init_sampler(temp=0.8), grammar, last=last)
        n, t0 = 0, time.perf_counter()
        try:
            while n < tokens:
                token = sampler.sample(llama._ctx, -1)
                if token == llama.token_eos():
                    break
                n += 1
                llama.eval([token])
        finally:
            sampler.close()
        per = (time.perf_counter() - t0) / max(n, 1)
        rules = grammar_rules(gbnf) if gbnf else 0
        lines.append(f"  {name:<46} {rules:>6} rules  {per * 1000:7.1f} ms/token ({n} "
                     f"tokens, {load()})")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20, help="rows of each evaluation (>= 2)")
    ap.add_argument("--menu-rows", type=int, help="rows of the menu-mode evaluations (default: "
                    "--rows; a menu decision of this model mostly writes max_tokens twice)")
    ap.add_argument("--only", choices=["menu", "json_schema"], help="one way of asking")
    ap.add_argument("--threads", type=int, help="threads of every runtime (default: from the "
                    "machine's load when the run starts, so a busy minute before it changes "
                    "every figure)")
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads
    loads = LlamaCppRuntime.loads
    t0 = time.perf_counter()
    rt = local_model()
    print(f"model: {rt.model} (loaded in {time.perf_counter() - t0:.2f} s); {load()}; "
          f"machine settings {machine_settings()}, n_ctx {rt.n_ctx}, threads {rt.n_threads}")
    print(f"writing speed: {writing_speed():.0f} tokens/s ({load()})")
    runs = []
    if args.only in (None, "json_schema"):
        runs += [("json_schema", "json_schema", {}),
                 ("json_schema, options undescribed", "json_schema",
                  {"options": UNDESCRIBED}),
                 ("json_schema, JSON schema in prompt", "json_schema",
                  {"schema_in_prompt": "json"}),
                 ("json_schema, no schema in prompt", "json_schema",
                  {"schema_in_prompt": False}),
                 ("json_schema, grammar first", "json_schema", {"grammar_last": False}),
                 ("json_schema, fast-forward off", "json_schema", {"fast_forward": False}),
                 ("json_schema, reuse+stop off", "json_schema",
                  {"reuse_prefix": False, "stop_at_pick": False})]
    if args.only in (None, "menu"):
        runs += [("menu (menu_first)", "menu", {}),
                 ("menu, as_sent layout", "menu", {"layout": "as_sent"})]
    print(f"\n{args.rows} rows per evaluation; seconds per decision (row 1, rows 2-{args.rows} "
          f"median and worst); prompt tokens read/reused (row 1, median of the rest); tokens "
          f"written (median/worst) and of them written by the runtime (forced, median); most "
          f"tokens past a pick's closing brace; parse rate; right picks")
    print(f"{'':<34} {'row1':>6} {'median':>7} {'worst':>6} {'row1 r/u':>12} "
          f"{'later r/u':>12} {'written':>10} {'forced':>6} {'past':>5} {'parse':>6} {'right':>7}")
    results = {}
    for name, mode, settings in runs:
        rows = args.rows if mode == "json_schema" else (args.menu_rows or args.rows)
        results[name] = evaluation(mode, rows, **settings)
        print(summary(name, results[name]), flush=True)
    for new, old in (("json_schema", "json_schema, JSON schema in prompt"),
                     ("json_schema", "json_schema, reuse+stop off"),
                     ("json_schema", "json_schema, grammar first"),
                     ("json_schema", "json_schema, fast-forward off"),
                     ("menu (menu_first)", "menu, as_sent layout")):
        if new in results and old in results:
            a = statistics.median(x["s"] for x in results[old]["rows"][1:])
            b = statistics.median(x["s"] for x in results[new]["rows"][1:])
            print(f"{new}: rows 2.. {a / b:.1f}x faster than {old!r} (median, same run)")
    if args.only in (None, "json_schema"):
        print("\nthe json_schema grammar of this tool set:")
        print("\n".join(grammar_cost()))
    print(f"\nmodel loads in this run: {LlamaCppRuntime.loads - loads}")


if __name__ == "__main__":
    main()
