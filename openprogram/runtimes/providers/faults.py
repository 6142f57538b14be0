"""Turning an SDK or network failure into words: the server's own message, the innermost cause,
and whether the failure was a timeout, a dropped connection or no server at all — each redacted
before it is shortened, so a cut never keeps a stretch of a key too short to be recognised.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...base.errors import OpenProgramError
from .transport import DeadlineExceeded


class Malformed(OpenProgramError, ValueError):
    """A reply that parsed as JSON but is not the provider's shape."""


def server_message(exc: Any, redact_text: Callable[[str], str]) -> str:
    """The server's own words about an error, shortened; redacted before it is shortened (a
    cut through the key would keep a stretch too short to be recognised)."""
    body = getattr(exc, "body", None)
    msg = getattr(exc, "message", None) or str(exc)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            msg = err["message"]
    return redact_text(str(msg))[:300]


def cause_chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def caused_by_timeout(exc: BaseException) -> bool:
    try:
        import httpx2
    except ImportError:
        return False
    return any(isinstance(e, (httpx2.TimeoutException, DeadlineExceeded, TimeoutError))
               for e in cause_chain(exc))


def is_transport_error(exc: BaseException) -> bool:
    try:
        import httpx2
    except ImportError:
        return False
    return any(isinstance(e, (httpx2.TransportError, ConnectionError)) for e in cause_chain(exc))


def unreachable(exc: BaseException) -> bool:
    """A connection that was never made (no server there), as opposed to one the server
    dropped."""
    try:
        import httpx2
    except ImportError:
        return True
    return any(isinstance(e, (httpx2.ConnectError, httpx2.ConnectTimeout, ConnectionRefusedError))
               for e in cause_chain(exc))


def cause_text(exc: BaseException, redact_text: Callable[[str], str]) -> str:
    """The innermost readable cause, e.g. "ConnectError: [Errno 111] Connection refused",
    redacted, then shortened."""
    last = exc
    for e in cause_chain(exc):
        last = e
    text = str(last) or type(last).__name__
    return redact_text(f"{type(last).__name__}: {text}")[:200]


