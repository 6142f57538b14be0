"""The batch path: an evaluation's model calls answered by the provider's batch API, in rounds.

OpenAI's Batch API and Anthropic's Message Batches answer the same requests as the online
endpoints at half the price, within a day. `BatchRuntime(inner)` wraps an `OpenAIRuntime` or an
`AnthropicRuntime`: every call builds the request exactly as the online path would (the same
way of asking, the same body, never streamed), then waits. When every row of the run is waiting
(no new call for `settle_s`), the waiting requests go out as one round — split into batches
within the provider's count and size limits — and the round is polled until it ends; each reply
is read by the runtime's own parser, so the decision loop sees a reply like any other. A
decision that needs a re-ask calls again and so joins the next round: retries are kept. Each
reply's raw record carries `batch` (batch id, custom id, round) and the trace shows it. A
request the batch did not answer (expired, cancelled) or answered with an error fails that
row's call with a `ModelCallError` naming the batch, the request and what to do. An interrupted
run (Ctrl-C) cancels its batches in flight at the provider unless a journal records them, so a
later call can re-attach (`attach`). `evaluate(...,
batch=True)` wraps the runtime itself. Status for a progress bar: `status()`.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from typing import Any

from ...base.errors import ArgumentError, UsageError
from ...base.json_form import sendable
from ...runtime.runtime import ModelCallError, ModelResponse, Runtime
from .key_redaction import MASK
from .runtime import mode_arguments

__all__ = ["BatchRuntime"]

#: The providers' limits on one batch (requests, bytes of the requests): OpenAI 50,000 requests
#: and a 200 MB input file; Anthropic 100,000 requests and 256 MB.
LIMITS = {"openai": (50_000, 200_000_000), "anthropic": (100_000, 256_000_000)}
OPENAI_DONE = ("completed", "expired", "cancelled", "failed")


class BatchRuntime(Runtime):
    """`BatchRuntime(OpenAIRuntime(...))`: the inner runtime's calls answered through its
    provider's batch API. `poll_s` is the wait between status checks (default 30 s; a batch
    takes minutes to hours), `settle_s` how long no new call must arrive before a round goes
    out, `max_requests` / `max_bytes` split a round into several batches (default: the
    provider's limits)."""

    def __init__(self, inner: Runtime, *, poll_s: float = 30.0, settle_s: float = 0.05,
                 max_requests: int | None = None, max_bytes: int | None = None):
        provider = inner.provider if isinstance(inner, Runtime) else None
        if provider not in LIMITS or not hasattr(inner, "_request"):
            raise UsageError(f"batch=True needs an OpenAIRuntime or an AnthropicRuntime (their "
                             f"providers have batch APIs); got {type(inner).__name__}. Run "
                             f"without batch=True.")
        for what, v in (("poll_s", poll_s), ("settle_s", settle_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ArgumentError(f"{what} must be a number of seconds >= 0, got {v!r}")
        count, size = LIMITS[provider]
        for what, v in (("max_requests", max_requests), ("max_bytes", max_bytes)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ArgumentError(f"{what} must be a whole number >= 1, got {v!r}")
        super().__init__(model=inner.model, name=inner.name)
        self.inner = inner
        self.streams = False
        self.poll_s, self.settle_s = float(poll_s), float(settle_s)
        self.max_requests = min(max_requests or count, count)
        self.max_bytes = min(max_bytes or size, size)
        self._pending: list[tuple[str, dict, asyncio.Future]] = []
        self._lock = threading.Lock()
        self._collector: asyncio.Task | None = None
        self._n = 0
        self.rounds = 0
        self.batches: list[dict] = []      # every batch sent: id, round, requests, final state
        self._status: str | None = None
        self._seen: dict[str, int] = {}
        self._flying: set[str] = set()     # batches sent and not ended
        self._round: list = []             # the calls of the round in flight
        self.cancelled: list[str] = []     # batches this runtime cancelled (an interrupted run)
        self._open: dict[str, dict] = {}   # batch id -> its journal line, for batches in flight
        self._record = None

    def attach(self, lines: list[dict], record) -> None:
        """A journal's batch lines (`record(data)` appends one): batches sent and not ended
        are re-attached to by the requests they hold, instead of being sent again."""
        ended = {x["batch_id"] for x in lines if x.get("state") != "submitted"}
        # an id that held the key was journaled masked: it cannot be asked for again, so its
        # requests are sent anew
        self._open = {x["batch_id"]: x for x in lines
                      if x.get("state") == "submitted" and x["batch_id"] not in ended
                      and MASK not in str(x["batch_id"])}
        self._record = record

    def __repr__(self) -> str:
        return f"BatchRuntime({self.inner!r}, {self.rounds} rounds)"

    @property
    def modes(self) -> frozenset:
        return self.inner.modes

    @property
    def async_native(self) -> bool:
        return True

    def redact(self, text):
        return self.inner.redact(text)

    def status(self) -> str | None:
        """The batch in flight and its own counts, for the progress bar."""
        return self._status

    def complete(self, messages, **kw) -> ModelResponse:
        raise UsageError("a BatchRuntime answers calls in rounds on an event loop: use it "
                         "through evaluate(..., batch=True) / aevaluate, or call acomplete")

    # -- one call ---------------------------------------------------------------------------
    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None,
                        **mode_args) -> ModelResponse:
        inner = self.inner
        tool_choice, response_format = mode_arguments(mode_args)
        ask = inner._request(messages, tools, tool_choice, response_format)
        for k in ("stream", "stream_options"):   # a batch answers whole
            ask.body.pop(k, None)
        ask.body = sendable(inner._fit(ask.body))
        # the request's own digest (and its repeat number): the same row asks the same way
        # after a restart, so its id finds it in a batch sent before
        with self._lock:
            self._n += 1
            cid = custom_id(ask.body, self._seen)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append((cid, ask.body, fut))
        if self._collector is None or self._collector.done():
            self._collector = loop.create_task(self._collect())
        try:
            code, body, where = await fut
        except asyncio.CancelledError:
            # the row was cancelled (Ctrl-C): once no row waits, the rounds stop too
            if all(f.done() for _, _, f in self._waiting()) and self._collector is not None:
                self._collector.cancel()
            raise
        if code != 200:
            raise ModelCallError(inner.redact(
                f"the {inner.api.name} batch {where['batch_id']} answered request "
                f"{cid} (round {where['round']}) with an error ({code}: "
                f"{json.dumps(body)[:300]}); evaluate the row again to send it in a new batch."),
                kind="model_error")
        resp = self.reply(ask, body)
        resp.raw["batch"] = where
        return resp

    def reply(self, ask: Any, body: dict) -> ModelResponse:
        """One answered request of a batch as the core gets a reply: the online path's own
        parser and shaping (way of asking, redaction, raw record)."""
        return self.inner._finish(self.inner._parse(self._sdk_object(body)), ask, body)

    def _sdk_object(self, body: dict) -> Any:
        # pydantic's validation (in Rust) is faster here than the SDKs' lenient `construct`
        if not isinstance(body, dict):
            raise ModelCallError(f"the batch answered a request with {type(body).__name__}, "
                                 f"not a JSON object; run again", kind="model_error")
        if self.inner.provider == "openai":
            from openai.types.chat import ChatCompletion
            return ChatCompletion.model_validate(body)
        from anthropic.types import Message
        return Message.model_validate(body)

    # -- rounds -----------------------------------------------------------------------------
    async def _collect(self) -> None:
        """Waits until no new call arrives for `settle_s`, then sends what waits as a round;
        again, until nothing waits."""
        seen = -1
        while self._pending:
            if len(self._pending) != seen:
                seen = len(self._pending)
                await asyncio.sleep(self.settle_s)
                continue
            todo, self._pending = self._pending, []
            everyone = self._round = list(todo)
            seen = -1
            self.rounds += 1
            jobs = []
            for bid, line in list(self._open.items()):
                ids = set(line.get("custom_ids") or ())
                mine = [t for t in todo if t[0] in ids]
                if mine:
                    todo = [t for t in todo if t[0] not in ids]
                    del self._open[bid]
                    jobs.append(self._one_batch(mine, line.get("round") or self.rounds, bid))
            jobs += [self._one_batch(part, self.rounds) for part in self._split(todo)]
            try:
                await asyncio.gather(*jobs)
            except asyncio.CancelledError:
                # the run was interrupted: without a journal nobody could re-attach, so the
                # batches in flight are cancelled (the provider bills what it answered)
                if self._record is None and self._flying:
                    # in a task of its own: this one is being cancelled, and the HTTP client
                    # refuses to work inside a cancelled task
                    await asyncio.shield(asyncio.get_running_loop().create_task(
                        self._cancel_flying()))
                raise
            except BaseException as exc:
                for _, _, fut in everyone:
                    if not fut.done():
                        fut.set_exception(exc if isinstance(exc, ModelCallError) else
                                          ModelCallError(self.redact(
                                              f"the batch round failed: "
                                              f"{type(exc).__name__}: {exc}"),
                                              kind="model_error"))
                if not isinstance(exc, Exception):
                    raise

    def _waiting(self) -> list:
        return self._pending + self._round

    async def _cancel_flying(self) -> None:
        client = self.inner._async_client()
        for bid in list(self._flying):
            try:
                if self.inner.provider == "openai":
                    await client.batches.cancel(bid)
                else:
                    await client.messages.batches.cancel(bid)
                self.cancelled.append(self.redact(bid))
            except Exception:   # best effort: the run is stopping either way
                pass
        self._flying.clear()

    def _split(self, todo: list) -> list[list]:
        parts, part, size = [], [], 0
        for item in todo:
            n = len(json.dumps(item[1])) + 100
            if part and (len(part) >= self.max_requests or size + n > self.max_bytes):
                parts.append(part)
                part, size = [], 0
            part.append(item)
            size += n
        return parts + [part] if part else parts

    def _sent(self, bid: str, part: list, round_no: int) -> None:
        if self._record is not None:
            self._record({"batch_id": self.redact(bid), "round": round_no,
                          "state": "submitted", "custom_ids": [cid for cid, _, _ in part]})

    async def _one_batch(self, part: list, round_no: int, attach: str | None = None) -> None:
        client = self.inner._async_client()
        send = self._openai if self.inner.provider == "openai" else self._anthropic
        answers, bid, state = await send(client, part, round_no, attach)
        self._flying.discard(bid)
        # the id and the state are the server's choice: from here on they are shown and
        # written, so they are redacted like its replies (the real id is only sent back)
        shown, state = self.redact(bid), self.redact(state)
        self.batches.append({"id": shown, "round": round_no, "requests": len(part),
                             "state": state, "attached": attach is not None})
        if self._record is not None:
            self._record({"batch_id": shown, "round": round_no, "state": state,
                          "answered": len(answers)})
        for cid, _, fut in part:
            if fut.done():
                continue
            where = {"batch_id": shown, "custom_id": cid, "round": round_no}
            if cid in answers:
                fut.set_result((*answers[cid], where))
            else:
                fut.set_exception(ModelCallError(
                    f"the {self.inner.api.name} batch {shown} ended {state} without answering "
                    f"request {cid} (round {round_no}); every answered request is kept. "
                    f"Evaluate the rows that failed this way again (their inputs only, or "
                    f"with a new journal=) to send them in a new batch.", kind="model_error"))

    async def _openai(self, client, part, round_no, attach):
        if attach is not None:
            b = await client.batches.retrieve(attach)
        else:
            lines = openai_jsonl(part)
            f = await client.files.create(file=("openprogram-batch.jsonl", lines),
                                          purpose="batch")
            b = await client.batches.create(input_file_id=f.id,
                                            endpoint="/v1/chat/completions",
                                            completion_window="24h")
            self._sent(b.id, part, round_no)
        self._flying.add(b.id)
        while b.status not in OPENAI_DONE:
            c = b.request_counts
            self._status = self.redact(f"batch {b.id} (round {round_no}) {b.status}"
                                       + (f": {c.completed + c.failed}/{c.total}" if c else ""))
            await asyncio.sleep(self.poll_s)
            b = await client.batches.retrieve(b.id)
        answers: dict = {}
        for fid in (b.output_file_id, b.error_file_id):
            if fid:
                read_openai_results((await client.files.content(fid)).content, answers)
        self._status = None
        return answers, b.id, b.status

    async def _anthropic(self, client, part, round_no, attach):
        if attach is not None:
            b = await client.messages.batches.retrieve(attach)
        else:
            b = await client.messages.batches.create(
                requests=[{"custom_id": cid, "params": body} for cid, body, _ in part])
            self._sent(b.id, part, round_no)
        self._flying.add(b.id)
        while b.processing_status != "ended":
            c = b.request_counts
            self._status = self.redact(f"batch {b.id} (round {round_no}) "
                                       f"{b.processing_status}: "
                                       f"{c.succeeded + c.errored}/{len(part)}")
            await asyncio.sleep(self.poll_s)
            b = await client.messages.batches.retrieve(b.id)
        answers: dict = {}
        state = "completed"
        async for item in await client.messages.batches.results(b.id):
            kind = item.result.type
            if kind == "succeeded":
                answers[item.custom_id] = (200, item.result.message.to_dict(mode="json"))
            elif kind == "errored":
                answers[item.custom_id] = (400, item.result.error.to_dict(mode="json"))
            else:
                state = {"canceled": "cancelled"}.get(kind, kind)
        self._status = None
        return answers, b.id, state


def openai_jsonl(part: list) -> bytes:
    """A round's requests as OpenAI's batch input file: one JSON line per request."""
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    return b"".join(dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                           "body": body}).encode() + b"\n" for cid, body, _ in part)


def read_openai_results(content: bytes, answers: dict) -> dict:
    """OpenAI's output or error file into `answers`: custom id -> (status, body)."""
    for raw in content.splitlines():
        if not raw.strip():
            continue
        item = json.loads(raw)
        r = item.get("response") or {}
        if r.get("status_code") is not None:
            answers[item["custom_id"]] = (r["status_code"], r.get("body"))
        else:   # a request the batch could not run at all (OpenAI's "error" object)
            answers[item["custom_id"]] = (500, item.get("error"))
    return answers


def custom_id(body: dict, seen: dict) -> str:
    """A request's id in its batch: a digest of the request and its repeat number (`seen`
    counts them), so a restarted run asks the same rows with the same ids."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
    seen[digest] = n = seen.get(digest, 0) + 1
    return f"op-{digest}-{n}"
