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
options)` reads a finished job back as an `EvaluationResult`. Ray is imported with this package;
`import openprogram` never imports it.

The modules: `columns` (the output columns, a finished row's values, `result`), `checks`
(what is named before a job starts), `limits` (the cluster's one rate limit), `workers`
(`decide`) and `llm` (`processor`, on Ray Data's LLM path).
"""
from __future__ import annotations

from ..base.errors import require

# before the modules, each of which imports Ray: its absence is named with the extra to install
ray = require("ray", "ray", "openprogram.ray")
pa = require("pyarrow", "ray", "openprogram.ray")

from .columns import OUTPUT_COLUMNS, output_schema, result, row_columns  # noqa: E402
from .llm import DecisionProcessor, openai_body, openai_reply, processor  # noqa: E402
from .workers import decide  # noqa: E402

__all__ = ["decide", "processor", "result", "output_schema", "OUTPUT_COLUMNS",
           "DecisionProcessor", "openai_body", "openai_reply", "row_columns"]
