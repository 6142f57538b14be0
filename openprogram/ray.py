"""Decisions where the data lives: an option set over a Ray Dataset (the `ray` extra).

`decide(ds, template, options, runtime=factory)` maps a `ray.data.Dataset` to one with each row's
columns plus the columns `evaluate(...).to_frame()` gives — the pick, the arguments and the
result (as JSON text), the error and its kind, the attempts, tokens, latency, whether a cache
answered, the confidence columns when asked — and the decision's trace as JSON. Each worker is
an instance of one callable class that builds its runtime once from `factory` (a runtime holds
clients and models that do not pickle) and runs the rows of each batch through `evaluate`, many
at once; a row that fails is a row with its error columns set, and success and failure rows have
one schema (`output_schema`). `rate_limit=` given once holds for the whole cluster: one Ray
actor holds the `RateLimit`, every request of every worker waits there for its turn, and a 429
pauses all of them. `processor(template, options, config)` is the same decision on Ray Data's
own LLM batch path (`ray.data.llm`): its preprocess is `plan.request` (the row's request as an
OpenAI chat-completions body for `HttpRequestProcessorConfig`, or messages and sampling
parameters with the decision's JSON schema as structured output for
`vLLMEngineProcessorConfig`), its postprocess `plan.resolve`, and the rows whose reply must be
asked again go through the processor once more, up to `max_retries` passes. `result(ds,
options)` reads a finished job back as an `EvaluationResult`. Ray is imported with this module;
`import openprogram` never imports it. It is long because the three entry points share the
output columns, the checks made before a job starts and the plumbing of a Ray job (workers,
the shared limit, passes), which belong to this module only.
"""
from __future__ import annotations

import functools
import json
import math
import time

from .base.errors import ArgumentError, UsageError, require
from .base.json_form import json_ready
from .base.model_protocol import ModelCaller
from .base.secrets import scrub
from .decision.rows import RowPlan
from .evaluation.evaluate import evaluate
from .evaluation.outcomes import Outcomes, summarize
from .evaluation.ratelimit import RateLimit, check_rate_limit
from .evaluation.results import EvaluationResult
from .evaluation.runner import Row
from .runtimes.providers.openai_runtime import to_openai_message, to_openai_tool
from .trace.decision_trace import RecordedError, trace_from_dict
from .trace.tables import CONFIDENCE_COLUMNS, confidence_row

ray = require("ray", "ray", "openprogram.ray")
pa = require("pyarrow", "ray", "openprogram.ray")

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

    from .base.type_names import Options

__all__ = ["decide", "processor", "result", "output_schema", "OUTPUT_COLUMNS",
           "DecisionProcessor", "openai_body", "openai_reply", "row_columns"]

#: The columns `decide` and `processor` add to every row, in order (the confidence columns
#: follow when the decision asks for a distribution). An input column of the same name is kept
#: as `input_<name>`, as `to_frame()` does.
OUTPUT_COLUMNS = ("chosen", "args", "result", "error", "error_kind", "error_kinds", "attempts",
                  "duration_s", "tokens_in", "tokens_out", "status", "cached", "trace")

#: What `evaluate` takes that a job over a dataset does not: each with what to do instead.
_NOT_HERE = {
    "journal": "a Ray job keeps its finished rows in its output (ds.write_parquet); to pay only "
               "for new rows, have the factory return a CachedRuntime, whose keys are "
               "evaluate's",
    "batch": "use processor() with Ray Data's own LLM batch path",
    "expected": "pass expected= to openprogram.ray.result() when reading the output back",
    "total": "Ray counts a dataset's rows itself",
    "progress": "Ray Data shows its own progress (DataContext.enable_progress_bars)",
    "on_interrupt": "stopping a Ray job is Ray's (ray.cancel, Ctrl-C in the driver)",
}


def output_schema(confidence: bool = False) -> Any:
    """The pyarrow schema of the columns a decision adds to a row, the same for a row that
    resolved and one that failed."""
    fields = [("chosen", pa.string()), ("args", pa.string()), ("result", pa.string()),
              ("error", pa.string()), ("error_kind", pa.string()),
              ("error_kinds", pa.list_(pa.string())), ("attempts", pa.int64()),
              ("duration_s", pa.float64()), ("tokens_in", pa.int64()),
              ("tokens_out", pa.int64()), ("status", pa.string()), ("cached", pa.bool_()),
              ("trace", pa.string())]
    if confidence:
        fields += [("p_pick", pa.float64()), ("runner_up", pa.string()),
                   ("p_runner_up", pa.float64()), ("margin", pa.float64()),
                   ("entropy", pa.float64()), ("confidence_source", pa.string())]
    return pa.schema(fields)


def _json(value: Any) -> str:
    return json.dumps(json_ready(value), ensure_ascii=False)


def row_columns(status: str, trace: Any, result: Any, error: BaseException | None,
                duration_s: float | None = None, confidence: bool = False) -> dict[str, Any]:
    """One finished row's output columns: what `evaluate` keeps of a row (`summarize`), its
    arguments, result and trace as JSON text, every string masked of the keys this process
    holds (as a journal line is)."""
    row = Row()
    row.status, row.trace, row.result, row.error = status, trace, result, error
    row.duration_s = duration_s if duration_s is not None else (
        trace.duration_s if trace is not None else None)
    status, pick, attempts, kinds, _, tin, tout, duration, cached = summarize(row)
    last = trace.attempts[-1] if trace is not None and trace.attempts else None
    out = {
        "chosen": pick,
        "args": _json(last.args) if last is not None and pick is not None else None,
        "result": _json(result) if status == "resolved" else None,
        # json_ready: the message may quote a reply's text that UTF-8 cannot encode
        "error": json_ready(f"{type(error).__name__}: {error}") if error is not None else None,
        "error_kind": (getattr(error, "kind", None) or (last.error_kind if last else None))
        if error is not None else None,
        "error_kinds": list(kinds), "attempts": attempts,
        "duration_s": None if duration is None or duration != duration else float(duration),
        "tokens_in": tin, "tokens_out": tout, "status": status, "cached": bool(cached),
        # to_dict(json_ready) is JSON data already: no second walk over it
        "trace": json.dumps(trace.to_dict(json_ready), ensure_ascii=False)
        if trace is not None else None,
    }
    if confidence:
        out.update(confidence_row(trace.confidence if trace is not None else None))
    return scrub(out)


def _table(batch: Any, rows: list[dict[str, Any]], schema: Any) -> Any:
    """`batch` (a pyarrow Table) with the output columns of `rows` appended; an input column
    of an output column's name kept as `input_<name>`."""
    names = [n if n not in schema.names else f"input_{n}" for n in batch.column_names]
    table = batch.rename_columns(names)
    for f in schema:
        table = table.append_column(f, pa.array([r[f.name] for r in rows], type=f.type))
    return table


# ---------------------------------------------------------------------------------------------
# Checks made before a job starts
# ---------------------------------------------------------------------------------------------


def _factory(runtime: Any) -> Callable[[], Any]:
    if runtime is None:
        raise UsageError("decide() needs runtime=factory: a function of no arguments that "
                         "builds the runtime in each worker, e.g. runtime=lambda: "
                         "OpenAIRuntime(model='gpt-4o-mini')")
    if isinstance(runtime, ModelCaller):
        raise UsageError(f"runtime= takes a factory, not a runtime: {type(runtime).__name__} "
                         f"holds clients or a model that cannot be pickled to Ray's workers. "
                         f"Pass a function that builds it in each worker: "
                         f"runtime=lambda: {type(runtime).__name__}(...)")
    if not callable(runtime):
        raise UsageError(f"runtime= takes a factory (a function of no arguments that returns a "
                         f"runtime), got {type(runtime).__name__}")
    return runtime


def _columns(ds: Any) -> list[str] | None:
    try:
        names = ds.columns()
    except Exception:  # a dataset whose schema Ray cannot know without running it
        return None
    return list(names) if names is not None else None


def _check_columns(ds: Any, plan: RowPlan, what: str) -> list[str] | None:
    if not hasattr(ds, "map_batches"):
        raise UsageError(f"{what} takes a ray.data.Dataset (ray.data.from_pandas(df), "
                         f"ray.data.read_parquet(...)), got {type(ds).__name__}")
    have = _columns(ds)
    if have is not None:
        missing = [f for f in plan.fields if f not in have]
        if missing:
            fields = ", ".join("{" + m + "}" for m in missing)
            raise ArgumentError(f"the prompt template uses {fields} but the dataset has no column "
                                f"{', '.join(map(repr, missing))} "
                                f"(its columns are {', '.join(map(repr, have)) or 'none'}); "
                                f"add the column (ds.add_column / ds.rename_columns) or fix the "
                                f"template")
    return have


def _check_carried(**things: Any) -> None:
    """Everything a worker gets is pickled (cloudpickle): what cannot be is named now, before
    the job starts, instead of failing inside Ray."""
    from ray import cloudpickle
    for name, value in things.items():
        try:
            cloudpickle.dumps(value)
        except Exception as exc:
            raise UsageError(f"{name}= cannot be carried to Ray's workers: it does not pickle "
                             f"({type(exc).__name__}: {str(exc)[:200]}). Build what it holds "
                             f"inside the worker instead (in the runtime factory, or a "
                             f"function that opens its own client)") from None


def _split(settings: dict[str, Any], what: str) -> dict[str, Any]:
    for k in settings:
        if k in _NOT_HERE:
            raise UsageError(f"{what} takes no {k}=: {_NOT_HERE[k]}")
    return settings


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{what} must be a whole number >= 1, got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------
# The rate limit shared by the cluster
# ---------------------------------------------------------------------------------------------


@ray.remote(num_cpus=0)
class _Limiter:
    """The one `RateLimit` of a job, in a Ray actor: `reserve` answers when the request may go
    (the wait happens here, on the actor's event loop, one remote call per request), and a 429
    seen by any worker pauses every worker's requests."""

    def __init__(self, rpm: Any, tpm: Any, patience_s: float):
        self.limit = RateLimit(rpm, tpm, patience_s=patience_s)

    async def reserve(self, tokens: int) -> int:
        import asyncio
        while True:
            wait, epoch = self.limit.reserve(tokens)
            if epoch >= 0:
                return epoch
            await asyncio.sleep(wait)

    def done(self, ok: bool) -> None:
        self.limit.done(ok)

    def limited(self, epoch: int, wait_s: float | None, since_first: float, cause: str) -> bool:
        # the worker's monotonic clock is not the actor's: the first try travels as an age
        return self.limit.limited(epoch, wait_s, time.monotonic() - since_first, cause)

    def stats(self) -> dict:
        return dict(self.limit.stats)


class _SharedLimit(RateLimit):
    """A worker's view of the job's `_Limiter`: what the provider transport asks of a
    `RateLimit`, answered by the actor (the transport's calls come from the rows' threads)."""

    def __init__(self, actor: Any, patience_s: float):
        super().__init__(patience_s=patience_s)
        self.actor = actor

    def reserve(self, tokens: int = 0) -> tuple[float, int]:
        return 0.0, ray.get(self.actor.reserve.remote(tokens))

    def done(self, ok: bool = True) -> None:
        self.actor.done.remote(ok)   # in order after this worker's reserve; nothing to wait for

    def limited(self, epoch: int, wait_s: float | None, first_try: float, cause: str) -> bool:
        return bool(ray.get(self.actor.limited.remote(epoch, wait_s,
                                                      time.monotonic() - first_try, cause)))

    def wait_sync(self, seconds: float) -> None:
        time.sleep(seconds)

    def status(self) -> str | None:
        return None


def shared_limit(rate_limit: Any) -> Any:
    """`rate_limit=` as the actor every worker of a job keeps to (None: none given)."""
    limit = check_rate_limit(rate_limit)
    if limit is None:
        return None
    return _Limiter.remote(limit.requests_per_minute, limit.tokens_per_minute,
                           limit.patience_s), limit.patience_s


def paced_session(actor: Any) -> Any:
    """An aiohttp session whose every request first waits for its turn at the job's
    `_Limiter` and reports how it went (a 429 / 529 pauses every worker): what
    `HttpRequestProcessorConfig(session_factory=)` opens, so Ray's HTTP stage keeps to the
    limit `decide` keeps to."""
    import aiohttp

    from .runtimes.providers.transport import header_wait
    hooks = aiohttp.TraceConfig()

    async def start(session: Any, ctx: Any, params: Any) -> None:
        ctx.epoch = await actor.reserve.remote(0)
        ctx.first = time.monotonic()

    async def end(session: Any, ctx: Any, params: Any) -> None:
        code = params.response.status
        if code in (429, 529):
            await actor.limited.remote(ctx.epoch, header_wait(params.response.headers),
                                       time.monotonic() - ctx.first,
                                       f"{code} from the server")
        else:
            actor.done.remote(code < 400)

    async def failed(session: Any, ctx: Any, params: Any) -> None:
        actor.done.remote(False)

    hooks.on_request_start.append(start)
    hooks.on_request_end.append(end)
    hooks.on_request_exception.append(failed)
    return aiohttp.ClientSession(trace_configs=[hooks])


# ---------------------------------------------------------------------------------------------
# decide: a runtime per worker, rows through evaluate
# ---------------------------------------------------------------------------------------------


class _Decide:
    """The callable class Ray Data makes one instance of per worker: the runtime built once
    from the factory, then each batch's rows through `evaluate` (`concurrency` at a time)."""

    def __init__(self, factory: Callable[[], Any], template: str, options: Options,
                 settings: dict[str, Any], concurrency: int, limit: Any, confidence: bool):
        rt = factory()
        if not isinstance(rt, ModelCaller):
            raise UsageError(f"the runtime factory returned {type(rt).__name__}, not a runtime; "
                             f"it must return one (ScriptedRuntime, OpenAIRuntime, "
                             f"LlamaCppRuntime, ...)")
        self.rt, self.template, self.options = rt, template, options
        self.settings, self.concurrency = settings, concurrency
        self.limit = _SharedLimit(*limit) if limit is not None else None
        self.schema = output_schema(confidence)
        self.confidence = confidence

    def __call__(self, batch: Any) -> Any:
        records = batch.to_pylist()
        if not records:
            return _table(batch, [], self.schema)
        res = evaluate(self.template, self.options, records, runtime=self.rt,
                       concurrency=max(1, min(self.concurrency, len(records))),
                       progress=False, rate_limit=self.limit, **self.settings)
        statuses, traces, results, errors = res.statuses, res.traces, res.results, res.errors
        rows = [row_columns(statuses[i], traces[i], results[i], errors[i],
                            confidence=self.confidence) for i in range(len(records))]
        return _table(batch, rows, self.schema)


def decide(ds: Any, template: str, options: Options, *, runtime: Callable[[], Any],
           workers: int = 1, concurrency: int = 8, batch_size: int = 64,
           rate_limit: Any = None, num_cpus: float = 0.5, **settings: Any) -> Any:
    """`template.format_map(row)` decided over `options` for every row of the Ray Dataset `ds`:
    a dataset of the same rows with the output columns added (`OUTPUT_COLUMNS`; lazy, as every
    Ray Data transform).

    `runtime=` is a factory (a function of no arguments) that builds the runtime in each of
    `workers` Ray actors, once; each actor runs `concurrency` rows of its batch at a time
    (`batch_size` rows a batch) and reserves `num_cpus` CPUs (keep it below 1 on a small
    machine: the actors would otherwise leave no CPU for reading the dataset). `settings` are
    `decision.make`'s (mode=, max_retries=, validate=, reask=, repair=, context=, timeout_s=,
    confidence=, ...), checked here before the job starts, as are the template's columns and
    that every setting pickles. `rate_limit=` (a RateLimit, a number of requests per minute, or
    a dict of RateLimit's arguments) holds for the whole cluster: one actor paces every
    worker's requests and pauses them all on a 429. A row whose decision fails is a row with
    status "failed" and its error columns set; the job goes on."""
    factory = _factory(runtime)
    _split(settings, "decide()")
    for k in ("runtime_name", "model", "takes_menu"):
        if k in settings:
            raise UsageError(f"decide() takes no {k}=: the runtime the factory builds names "
                             f"its model (the traces record its name)")
    check = RowPlan(template, options, **{k: v for k, v in settings.items() if k != "timeout_s"})
    _check_columns(ds, check, "decide()")
    _positive(workers, "workers")
    _positive(concurrency, "concurrency")
    _positive(batch_size, "batch_size")
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or num_cpus < 0:
        raise ArgumentError(f"num_cpus must be a number >= 0 (the CPUs each worker reserves), "
                            f"got {num_cpus!r}")
    _check_carried(runtime=factory, options=options, **settings)
    limit = shared_limit(rate_limit)
    confidence = bool(settings.get("confidence"))
    return ds.map_batches(
        _Decide, fn_constructor_args=(factory, template, options, settings, concurrency, limit,
                                      confidence),
        batch_format="pyarrow", batch_size=batch_size,
        # two batches at once per worker: one's last rows overlap the next one's first
        compute=ray.data.ActorPoolStrategy(size=workers, max_concurrent_calls_per_actor=2,
                                           enable_true_multi_threading=True),
        num_cpus=num_cpus)


# ---------------------------------------------------------------------------------------------
# processor: the decision on Ray Data's LLM batch path
# ---------------------------------------------------------------------------------------------

#: The column a row's pending request and earlier replies travel in between passes.
STATE = "__decision_state"
#: The column Ray's engine stages set on a row they failed on (`should_continue_on_error`).
ERROR_COLUMN = "__inference_error__"


def openai_body(request: dict, model: str | None, **fields: Any) -> dict:
    """A plan's request as an OpenAI chat-completions body: messages in the protocol, one
    function tool per option with the tool choice forced, or the decision's schema as
    `response_format` (not strict: the schema is sent as the way of asking made it)."""
    body: dict[str, Any] = {**fields,
                            "messages": [to_openai_message(m) for m in request["messages"]]}
    if model is not None:
        body["model"] = model
    if request.get("tools"):
        body["tools"] = [to_openai_tool(t) for t in request["tools"]]
        if request.get("tool_choice"):
            body["tool_choice"] = request["tool_choice"]
            body["parallel_tool_calls"] = False
    fmt = request.get("response_format")
    if fmt is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": fmt.get("name") or "decision", "schema": fmt["schema"], "strict": False}}
    if request.get("temperature") is not None:   # a sample of decision.Samples
        body["temperature"] = request["temperature"]
    return body


def openai_reply(body: Any) -> Any:
    """An OpenAI chat-completions response (JSON) as a reply `plan.resolve` reads; an error
    body as a failed call."""
    if not isinstance(body, dict):
        return {"error": f"the server answered {type(body).__name__}, not a JSON object"}
    if body.get("error") is not None:
        err = body["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        return {"error": f"the server answered with an error: {str(msg)[:500]}"}
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict) \
            or not isinstance(choices[0].get("message"), dict):
        return {"error": "the response has no choices[0].message"}
    msg = choices[0]["message"]
    calls = []
    for tc in msg.get("tool_calls") or ():
        fn = tc.get("function") if isinstance(tc, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            args = fn.get("arguments")
            try:
                args = json.loads(args) if isinstance(args, str) and args else (args or {})
            except ValueError:
                pass   # text that is not JSON reaches the pick's check, which says so
            calls.append({"name": fn["name"], "args": args, "id": tc.get("id")})
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    out: dict[str, Any] = {"text": msg.get("content") or "", "tool_calls": calls,
                           "finish_reason": choices[0].get("finish_reason"),
                           "model": body.get("model"), "refusal": msg.get("refusal")}
    if usage:
        out["usage"] = {"input_tokens": usage.get("prompt_tokens"),
                        "output_tokens": usage.get("completion_tokens")}
    return out


class _Ways:
    """How a plan's request goes to an engine and its answer comes back: an OpenAI-compatible
    endpoint (`payload` -> `http_response`) or a vLLM engine (`messages` and
    `sampling_params` -> `generated_text`)."""

    def __init__(self, config: Any, model: str | None, sampling: dict[str, Any]):
        from ray.data import llm
        self.http = isinstance(config, llm.HttpRequestProcessorConfig)
        self.vllm = isinstance(config, llm.vLLMEngineProcessorConfig)
        if not (self.http or self.vllm):
            raise UsageError(f"processor() takes an HttpRequestProcessorConfig (any "
                             f"OpenAI-compatible endpoint) or a vLLMEngineProcessorConfig, got "
                             f"{type(config).__name__}")
        if self.http and not model:
            raise UsageError("processor() with an HttpRequestProcessorConfig needs model=, "
                             "the model name the endpoint serves (sent in every request body)")
        self.model, self.sampling = model, sampling

    def send(self, request: dict) -> dict:
        if self.http:
            return {"payload": openai_body(request, self.model, **self.sampling)}
        if request.get("tools"):
            raise UsageError("a vLLMEngineProcessorConfig takes no tools: ask with "
                             "mode='json_schema' (the engine's structured output) or 'menu'")
        params = dict(self.sampling)
        fmt = request.get("response_format")
        if fmt is not None:
            params["structured_outputs"] = {"json": fmt["schema"]}
        if request.get("temperature") is not None:
            params["temperature"] = request["temperature"]
        return {"messages": [to_openai_message(m) for m in request["messages"]],
                "sampling_params": params}

    def reply(self, row: dict) -> Any:
        if self.http:
            return openai_reply(row.get("http_response"))
        out: dict[str, Any] = {"text": row.get("generated_text") or ""}
        n = row.get("num_generated_tokens")
        if n is not None:
            out["usage"] = {"input_tokens": None, "output_tokens": int(n)}
        return out


class _Pre:
    """A pass's preprocess: the row's first request (`plan.request`), or the one an earlier
    pass left pending, in the engine's form."""

    def __init__(self, plan: RowPlan, ways: _Ways):
        self.plan, self.ways = plan, ways

    def __call__(self, row: dict) -> dict:
        state = row.get(STATE)
        request = json.loads(state)["request"] if state else self.plan.request(row)
        return self.ways.send(request)


class _Post:
    """A pass's postprocess: the engine's answer read by `plan.resolve` into the row's output
    columns; a row that must be asked again keeps its next request and its replies so far in
    the state column, with status "pending"."""

    def __init__(self, plan: RowPlan, ways: _Ways, inputs: list[str], confidence: bool):
        self.plan, self.ways, self.inputs, self.confidence = plan, ways, inputs, confidence

    def __call__(self, row: dict) -> dict:
        return self.outcome(row, self.ways.reply(row))

    def errored(self, row: dict) -> dict:
        """A row the engine failed on (vLLM's `should_continue_on_error=True` hands it back
        with `__inference_error__` set, past the postprocess): its attempt's `model_error`,
        read as any failed call is; the other rows as they are, without that column."""
        error = row.get(ERROR_COLUMN)
        if not error:
            return {k: v for k, v in row.items() if k != ERROR_COLUMN}
        return self.outcome(row, {"error": f"the engine failed on this row: {error}"})

    def outcome(self, row: dict, reply: Any) -> dict:
        state = row.get(STATE)
        earlier = json.loads(state)["replies"] if state else []
        out = self.plan.resolve(row, reply, earlier=earlier)
        cols = row_columns("failed" if out.status == "pending" else out.status, out.trace,
                           out.result, out.error, confidence=self.confidence)
        if out.status == "pending":
            cols["status"] = "pending"
        carried = json.dumps({"request": out.request, "replies": out.replies},
                             ensure_ascii=False) if out.status == "pending" else ""
        return {**{k: row[k] for k in self.inputs}, **cols, STATE: scrub(carried)}


class DecisionProcessor:
    """`processor(...)`: call it on a dataset to run the decision over it on Ray Data's LLM
    batch path. Each pass is a `ray.data.llm` processor whose preprocess is `plan.request` (or
    the pending request of an earlier pass) and whose postprocess is `plan.resolve`; the rows
    that need a re-ask go through the next pass. Passes are materialized (a pass is read twice:
    rows finished, rows to ask again), so calling it runs the job; `.passes` says how many
    it took."""

    def __init__(self, plan: RowPlan, config: Any, ways: _Ways, confidence: bool,
                 build: dict[str, Any]):
        self.plan, self.config, self.ways = plan, config, ways
        self.schema = output_schema(confidence)
        self.confidence = confidence
        self.build = build
        self.passes = 0

    def __call__(self, ds: Any) -> Any:
        from ray.data.llm import build_processor
        have = _check_columns(ds, self.plan, "processor()")
        if have is None:
            have = list(ds.schema().names)
        inputs = [c for c in have if c != STATE]
        post = _Post(self.plan, self.ways, inputs, self.confidence)
        llm = build_processor(self.config, preprocess=_Pre(self.plan, self.ways),
                              postprocess=post, **self.build)
        done = []
        todo = ds
        # a Samples(n) decision asks n times per attempt, one reply a pass
        n = getattr(self.plan.settings.get("confidence"), "n", 1) or 1
        self.passes = 0
        for _ in range(self.plan.attempts * n):
            out = llm(todo).materialize()
            if ERROR_COLUMN in out.schema().names:
                out = out.map(post.errored).materialize()
            self.passes += 1
            done.append(out.filter(lambda r: r["status"] != "pending"))
            todo = out.filter(lambda r: r["status"] == "pending").materialize()
            if todo.count() == 0:
                break
        else:
            raise RuntimeError(f"internal error: rows still wait for a reply after "
                               f"{self.passes} passes")
        whole = done[0].union(*done[1:]) if len(done) > 1 else done[0]
        return whole.map_batches(_finish, fn_kwargs={"inputs": inputs, "schema": self.schema},
                                 batch_format="pyarrow")


def _finish(batch: Any, inputs: list[str], schema: Any) -> Any:
    """The last step of a processor job: the input columns, then the output columns in the
    schema every row shares (a block whose rows all failed has no type for a pick)."""
    cols = [batch.column(c) for c in inputs]
    names = [n if n not in schema.names else f"input_{n}" for n in inputs]
    for f in schema:
        col = batch.column(f.name)
        cols.append(col.cast(f.type) if col.type != f.type else col)
        names.append(f.name)
    return pa.table(cols, names=names)


def processor(template: str, options: Options, config: Any, *, model: str | None = None,
              sampling: dict[str, Any] | None = None, build: dict[str, Any] | None = None,
              rate_limit: Any = None, **settings: Any) -> DecisionProcessor:
    """The decision of `template` over `options` as a `ray.data.llm` processor job: call the
    returned `DecisionProcessor` on a dataset (`processor(...)(ds)`) to get each row with the
    output columns `decide` adds.

    `config` is an `HttpRequestProcessorConfig` (any OpenAI-compatible endpoint: `model=` names
    the model sent in each body; the way of asking is sent as OpenAI's tools or
    response_format) or a `vLLMEngineProcessorConfig` (the engine in the workers; mode
    "json_schema" becomes the engine's structured output, "menu" free text). `sampling` adds
    fields to every request body (temperature, max_tokens, ...) or, for vLLM, to its sampling
    parameters; `build` goes to `ray.data.llm.build_processor` (preprocess_map_kwargs, ...).
    `settings` are `decision.make`'s; a row whose reply must be asked again goes through the
    processor once more, up to `max_retries` extra passes. `rate_limit=` (HTTP only) holds for
    every worker of the HTTP stage, as in `decide`: their session asks the job's one limit
    actor before each request (`paced_session`)."""
    _split(settings, "processor()")
    plan = RowPlan(template, options, runtime_name=f"ray.data.llm:{type(config).__name__}",
                   model=model, **settings)
    _check_carried(options=options, **settings)
    ways = _Ways(config, model, dict(sampling or {}))
    if check_rate_limit(rate_limit) is not None:   # checked before the actor is made
        if not ways.http:
            raise UsageError("rate_limit= paces HTTP requests; a vLLMEngineProcessorConfig runs "
                             "the engine in the workers and sends none: drop rate_limit=")
        if config.session_factory is not None:
            raise UsageError("rate_limit= opens the HTTP stage's sessions itself "
                             "(session_factory=paced_session): leave the config's "
                             "session_factory unset")
    limit = shared_limit(rate_limit)
    if limit is not None:
        config = config.model_copy(update={
            "session_factory": functools.partial(paced_session, limit[0])})
    return DecisionProcessor(plan, config, ways, bool(settings.get("confidence")),
                             dict(build or {}))


# ---------------------------------------------------------------------------------------------
# result: a finished job read back
# ---------------------------------------------------------------------------------------------


def result(ds: Any, options: Options, *, expected: Any = None,
           template: str | None = None) -> EvaluationResult:
    """A finished `decide` / `processor` job's output (a Ray Dataset, a pyarrow Table or a
    pandas DataFrame of one) as an `EvaluationResult`: accuracy, the confusion table,
    calibration, `traces[i]` and the panel work as on `evaluate`'s. Rows are in the order the
    dataset gives them; each result is its JSON form (as a journaled evaluation's). `expected`
    is a column name or a list of option names, one per row; `template` is kept as the
    result's prompt."""
    from .decision.options import normalize
    table = _arrow(ds)
    missing = [c for c in OUTPUT_COLUMNS if c not in table.column_names]
    if missing:
        raise ArgumentError(f"the dataset has no column {', '.join(map(repr, missing))}: it is "
                            f"not the output of openprogram.ray.decide() or processor()")
    names = [o.name for o in normalize(options)]
    n = table.num_rows
    o = Outcomes(names, n)
    inputs = [c for c in table.column_names if c not in OUTPUT_COLUMNS and c != STATE
              and c not in CONFIDENCE_COLUMNS]
    shown = [c[6:] if c.startswith("input_") and c[6:] in OUTPUT_COLUMNS else c for c in inputs]
    exp = _expected(expected, table, n, names)
    records, rows = [], []
    for i, r in enumerate(table.to_pylist()):
        status = r["status"] if r["status"] in ("resolved", "failed") else "cancelled"
        trace = trace_from_dict(json.loads(r["trace"])) if r["trace"] else None
        error = None
        if r["error"] is not None:
            type_name, _, message = r["error"].partition(": ")
            error = RecordedError(r["error_kind"], type_name, message)
        raised = f"raised {error.type_name}" if error is not None and error.kind is None \
            else None
        o.set(i, (status, r["chosen"], r["attempts"] or 0, tuple(r["error_kinds"] or ()),
                  raised, r["tokens_in"], r["tokens_out"], r["duration_s"], bool(r["cached"])))
        if exp is not None and exp[i] is not None:
            o.expected[i] = o.code(exp[i])
        if trace is not None and trace.confidence is not None:
            o.conf[i] = trace.confidence
        row = Row()
        row.status, row.trace, row.error = status, trace, error
        row.result = json.loads(r["result"]) if r["result"] is not None else None
        row.duration_s = r["duration_s"]
        rows.append(row)
        records.append({k: r[c] for k, c in zip(shown, inputs)})
    runtime = next((x.trace.runtime for x in rows if x.trace is not None), None)
    return EvaluationResult(prompt=template or "", options=names, columns=shown,
                            records=records, outcomes=o, rows=rows,
                            has_expected=exp is not None, wall_s=float("nan"), concurrency=1,
                            runtime=runtime, interrupted=False, name=None)


def _arrow(ds: Any) -> Any:
    """A job's output as one pyarrow Table (its values read back as plain Python)."""
    if isinstance(ds, pa.Table):
        return ds
    if hasattr(ds, "columns") and hasattr(ds, "to_dict"):   # a pandas DataFrame
        return pa.Table.from_pandas(ds, preserve_index=False)
    if hasattr(ds, "to_arrow_refs"):
        tables = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]
        if not tables:
            raise ArgumentError("the dataset has no rows to read back")
        return pa.concat_tables(tables, promote_options="permissive")
    raise UsageError(f"result() takes the Ray Dataset decide() or processor() returned (or its "
                     f"pandas DataFrame / pyarrow Table), got {type(ds).__name__}")


def _expected(expected: Any, table: Any, n: int, names: list[str]) -> list | None:
    if expected is None:
        return None
    if isinstance(expected, str):
        if expected not in table.column_names:
            raise ArgumentError(f"expected={expected!r} is not a column of the dataset (its "
                                f"columns are {', '.join(map(repr, table.column_names))})")
        values = table.column(expected).to_pylist()
    else:
        values = list(expected)
        if len(values) != n:
            raise ArgumentError(f"expected has {len(values)} items but the dataset has {n} "
                                f"rows; give one expected option name per row (None if unknown)")
    out = [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]
    bad = sorted({repr(v) for v in out if v is not None and v not in names})
    if bad:
        raise ArgumentError(f"expected names {', '.join(bad[:5])} are not options of the option "
                            f"set (the options are {', '.join(names)})")
    return out
