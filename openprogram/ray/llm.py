"""`processor`: the decision on Ray Data's own LLM batch path (`ray.data.llm`). Its
preprocess is `plan.request` (an OpenAI chat body, or messages with the decision's schema as
structured output for a vLLM engine), its postprocess `plan.resolve`; rows whose reply must be
asked again go through the processor once more, up to `max_retries` passes.
"""
from __future__ import annotations

import functools
import json

from ..base.errors import UsageError, require
from ..base.secrets import scrub
from ..decision.rows import RowPlan
from ..evaluation.ratelimit import check_rate_limit
from ..runtimes.providers.openai_runtime import to_openai_message, to_openai_tool
from .checks import _check_carried, _check_columns, _split
from .columns import ERROR_COLUMN, STATE, output_schema, row_columns
from .limits import paced_session, shared_limit

ray = require("ray", "ray", "openprogram.ray")
pa = require("pyarrow", "ray", "openprogram.ray")

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    from ..base.type_names import Options

# ---------------------------------------------------------------------------------------------
# processor: the decision on Ray Data's LLM batch path
# ---------------------------------------------------------------------------------------------

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
