"""`ScriptedRuntime`: the embedded default runtime, a model whose replies are written in advance.

Every notebook, test and demo runs on it without a network or a key. It plays the given replies
in order — text, native tool calls (`ToolCall` or a list of them), or a callable of the prompt
text that returns either — or answers every call by a rule. It can stream its text in chunks and
add a fixed or random latency, so live views, concurrency and benchmarks work offline.
"""
from __future__ import annotations

import time
from _thread import allocate_lock as Lock  # threading.Lock itself, without importing threading
from dataclasses import dataclass, field

from ..base.errors import ModelCallError, ScriptExhausted
from ..runtime.runtime import (
    DEFAULT_WINDOW,
    ModelResponse,
    Runtime,
    ToolCall,
    Window,
    as_response,
    blocks_text,
    to_blocks,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any


@dataclass
class ScriptedCall:
    """One model call made on a ScriptedRuntime."""
    prompt: str                    # the text of the last user turn
    messages: list[dict]
    tools: list[dict] | None
    reply: Any = None
    tool_names: list[str] = field(default_factory=list)
    mode_args: dict = field(default_factory=dict)  # tool_choice= / response_format= sent




class ScriptedRuntime(Runtime):
    """`ScriptedRuntime(["reply 1", ToolCall("search", {"q": "x"}), "reply 3"])` plays replies
    in order; `ScriptedRuntime(rule=fn)` answers every call with `fn(prompt_text)`.

    `latency` (seconds, or a (low, high) range drawn at random) is slept before each reply;
    `stream_chunk=n` streams the text n characters at a time, spreading the latency over the
    chunks. `usage=True` reports word counts as token usage.

    `calls` holds the most recent `window` calls made (1,000 by default, as many as the DAG
    keeps; None keeps every one); `runtime.window = n` changes both."""

    streams = True
    #: A script can hold text, JSON or tool calls, so it plays every way of asking.
    modes = frozenset({"menu", "tools", "json_schema"})

    def __init__(self, replies: list | None = None, *, rule: Callable[[str], Any] | None = None,
                 latency: float | tuple[float, float] = 0.0, stream_chunk: int | None = None,
                 seed: int | None = None, usage: bool = True, name: str = "scripted",
                 model: str = "scripted", window: int | None = DEFAULT_WINDOW):
        super().__init__(name=name, model=model, window=window)
        if replies is None and rule is None:
            raise TypeError("ScriptedRuntime needs replies=[...] (played in order) or rule=fn "
                            "(called with each prompt's text)")
        if replies is not None and not isinstance(replies, (list, tuple)):
            raise TypeError(f"replies must be a list, got {type(replies).__name__}; for one "
                            f"reply write [reply]")
        self.replies = list(replies or [])
        self.rule = rule
        self.latency = latency
        self.stream_chunk = stream_chunk
        self.usage = usage
        self.calls: Window = Window(window)
        self._lock = Lock()
        self._next = 0
        self._seed, self._random = seed, None

    def __repr__(self) -> str:
        return (f"ScriptedRuntime({len(self.replies)} replies, {self._next} used"
                + (", rule" if self.rule else "") + ")")

    @property
    def remaining(self) -> int:
        return len(self.replies) - self._next

    def _delay(self) -> float:
        if isinstance(self.latency, (tuple, list)):
            lo, hi = self.latency
            with self._lock:
                if self._random is None:
                    import random
                    self._random = random.Random(self._seed)
                return self._random.uniform(lo, hi)
        return float(self.latency or 0)

    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 **mode_args) -> ModelResponse:
        resp, delay = self._take(messages, tools, mode_args)
        if timeout is not None and delay > timeout:
            time.sleep(max(timeout, 0))
            raise self._too_slow(timeout)
        stream_text(resp.text, self.stream_chunk, on_text, delay)
        return self._count(resp, messages)

    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None,
                        **mode_args) -> ModelResponse:
        """The same script on the caller's event loop: latency is `asyncio.sleep`, so many
        async decisions overlap without a thread each."""
        import asyncio
        resp, delay = self._take(messages, tools, mode_args)
        if timeout is not None and delay > timeout:
            await asyncio.sleep(max(timeout, 0))
            raise self._too_slow(timeout)
        for piece, wait in stream_pieces(resp.text, self.stream_chunk, on_text, delay):
            if wait:
                await asyncio.sleep(wait)
            if piece is not None:
                on_text(piece)
        return self._count(resp, messages)

    def _take(self, messages, tools, mode_args) -> tuple[ModelResponse, float]:
        """The next scripted reply (recorded in `calls`) and the latency to play it with."""
        prompt = _last_user_text(messages)
        record = ScriptedCall(prompt, list(messages), tools, mode_args=dict(mode_args))
        with self._lock:
            self.calls.append(record)
            if self._next < len(self.replies):
                item = self.replies[self._next]
                self._next += 1
            elif self.rule is not None:
                item = self.rule
            else:
                n = len(self.calls) + self.calls.dropped
                raise ScriptExhausted(
                    f"ScriptedRuntime ran out of replies: {len(self.replies)} given, call "
                    f"#{n} asked for one more. Add a reply for this call (a re-ask after a bad "
                    f"reply, or a tool round, needs one too); its prompt began: {prompt[:120]!r}")
        out = item(prompt) if callable(item) else item
        resp = as_response(out)
        record.reply = resp.text
        record.tool_names = [t.name for t in resp.tool_calls]
        return resp, self._delay()

    @staticmethod
    def _too_slow(timeout: float) -> ModelCallError:
        return ModelCallError(f"the scripted model took longer than the {timeout:.3f}s left",
                              kind="timeout")

    def _count(self, resp: ModelResponse, messages) -> ModelResponse:
        if self.usage and resp.usage is None:
            text = resp.text
            resp.usage = {"input_tokens": word_count(_all_text(messages)),
                          "output_tokens": word_count(text) if isinstance(text, str) else 0}
        return resp


# Every ASCII whitespace character str.split() splits on, mapped to a space; the rest to "w".
_WORDS = bytes(32 if chr(i).isspace() else 119 for i in range(256))


def word_count(text: str) -> int:
    """`len(text.split())` without making a string per word: a menu of 100 options is about
    4,000 words, and splitting it was most of the scripted model's time. ASCII text is mapped
    to spaces and "w"s in C and the starts of words are counted."""
    if not text.isascii():
        return len(text.split())
    marks = text.encode("ascii").translate(_WORDS)
    return marks.count(b" w") + marks.startswith(b"w")


def stream_pieces(text: Any, chunk: int | None, on_text, seconds: float):
    """(piece, wait before it) pairs that stream `text` in `chunk`-character pieces over
    `seconds`; with nothing to stream, one wait and no piece."""
    pieces = ([text[i:i + chunk] for i in range(0, len(text), chunk)]
              if chunk and on_text is not None and isinstance(text, str) else [])
    if not pieces:
        return [(None, seconds)]
    return [(p, seconds / len(pieces)) for p in pieces]


def stream_text(text: Any, chunk: int | None, on_text: Callable[[str], None] | None,
                seconds: float = 0.0) -> None:
    """Send `text` to `on_text` in pieces of `chunk` characters spread over `seconds`, as a
    streaming model would; with nothing to stream, just take the `seconds`."""
    for piece, wait in stream_pieces(text, chunk, on_text, seconds):
        if wait:
            time.sleep(wait)
        if piece is not None:
            on_text(piece)


def _last_user_text(messages: list[dict]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return blocks_text(to_blocks(m["content"]))
    return ""


def _all_text(messages: list[dict]) -> str:
    parts = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts.append(blocks_text(to_blocks(c)))
    return " ".join(parts)


__all__ = ["ScriptedRuntime", "ScriptedCall", "ScriptExhausted", "ToolCall"]
