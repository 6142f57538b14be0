"""What a reply's values may be: JSON's, and nothing else (rule P3, "decided here").

A reply may hold finite numbers and valid Unicode text; Python's json module lets through
`1e400`, `NaN` and lone surrogates, so `check_json_value` refuses them wherever they sit (kind
`invalid_value`, with the path). Here too: JSON equality (`equal`: `1 == 1.0`, but a boolean
never equals a number), how a value is named in an error message (`describe_value`,
`json_head`, a key made safe for a path), and the checks of the string formats the validator
asserts (`FORMAT_CHECKS`, each exactly as its RFC writes it: date, date-time, time, duration,
email, idn-email, hostname, ipv4, ipv6, uri, uri-reference, uuid, regex, json-pointer; and
OpenAPI's numeric formats, `OPENAPI_FORMATS`, as bounds).
"""
from __future__ import annotations

import json
import math
import re
import sys

from ...base.errors import AttemptError
from ...base.json_form import SURROGATE, is_plain
from .type_table import json_type

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["check_json_value", "describe_value", "json_head", "json_text", "safe_key", "equal",
           "FORMAT_CHECKS", "OPENAPI_FORMATS", "PYTHON_FORMAT_CHECKS"]

_SURROGATE = SURROGATE



def _preview(v: Any, depth: int = 0) -> Any:
    """Enough of `v` to show its start: an error message costs little however large the value."""
    if isinstance(v, str):
        return v[:61]
    if isinstance(v, int) and not isinstance(v, bool) and _too_many_digits(v):
        return f"<an integer of about {_too_many_digits(v)} digits>"
    if depth > 3 and isinstance(v, (list, dict)):
        return "..."
    if isinstance(v, list):
        return [_preview(x, depth + 1) for x in v[:8]]
    if isinstance(v, dict):
        return {str(k)[:30]: _preview(x, depth + 1) for k, x in list(v.items())[:8]}
    return v


def json_text(v: Any) -> str:
    """`v` as JSON text, text as written (거실, not \\uac70\\uc2e4), a lone surrogate escaped."""
    text = json.dumps(v, default=repr, ensure_ascii=False)
    return text if text.isascii() or not SURROGATE.search(text) else json.dumps(v, default=repr)


def json_head(v: Any) -> str:
    """The start of `v` as JSON text, for an error message: text as written (거실), a lone
    surrogate escaped."""
    text = json.dumps(_preview(v), default=repr, ensure_ascii=False)
    if not text.isascii() and SURROGATE.search(text):
        text = json.dumps(_preview(v), default=repr)
    return text[:60]


def describe_value(v: Any) -> str:
    """`boolean true`, `string "abc"`: a value as an error message names it."""
    return f"{json_type(v) or type(v).__name__} {json_head(v)}"


def _too_many_digits(value: int) -> int | None:
    """About how many digits `value` has when that is more than Python will print (and json
    will read or write: 4300 by default), else None."""
    limit = sys.get_int_max_str_digits()
    digits = int(value.bit_length() * math.log10(2)) + 1
    return digits if limit and digits > limit else None


def _bad_json_value(value: Any) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value!r} (write numbers JSON can hold)"
    if isinstance(value, int) and value.bit_length() > 14_000 and _too_many_digits(value):
        # Not from a reply (json refuses such a literal), but a tool call's arguments may come
        # from a runtime's own decoding: a number no trace, log or export could print.
        return (f"must be a number JSON can hold, got an integer of about "
                f"{_too_many_digits(value)} digits")
    if isinstance(value, str) and not value.isascii():
        bad = _SURROGATE.search(value)  # a search, not an encode: a huge text is not copied
        if bad:
            return (f"is not valid Unicode text (a lone surrogate at character {bad.start()}); "
                    f"write plain text")
    return None


def safe_key(key: str) -> str:
    """A key of the model's, fit to go into a path: a lone surrogate shows as its escape, so
    no error message, record or view ever holds text that cannot be written out."""
    return key if key.isascii() or not _SURROGATE.search(key) else \
        key.encode("utf-8", "backslashreplace").decode("utf-8")


def check_json_value(value: Any, path: str, deep: bool = False, numbers: bool = True) -> None:
    """A reply may hold only what JSON means: finite numbers and valid Unicode. Python's json
    module lets through `1e400` (as inf), `NaN`, `Infinity` and lone surrogates (`"\\ud800"`);
    a value of those never reaches a function, whatever its declared type says (`numbers=False`
    leaves numbers to a pydantic type's own `allow_inf_nan`). Iterative, so the deepest
    structure json accepted is checked without recursion."""
    stack = [(value, path)]
    while stack:
        v, where = stack.pop()
        problem = _bad_json_value(v) if numbers or isinstance(v, str) else None
        if problem:
            raise AttemptError("invalid_value", f"{where} {problem}", where)
        if deep and isinstance(v, list):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v))
        elif deep and isinstance(v, dict):
            for k, x in v.items():
                # The key goes on last, so it is checked before any value under it: a path
                # is built only from keys that passed.
                stack.append((x, f"{where}.{k}"))
                stack.append((k, f"{where} (a key)"))


def is_json_value(value: Any) -> bool:
    """Whether `value` holds only what JSON means, all the way down: the quick yes of
    `check_json_value(value, path, deep=True)`, which names the fault when this says no (or
    finds none, for a value of other types or nested deeper than plain JSON is). The test is
    the library's one test of plain JSON (`json_form.is_plain`)."""
    return is_plain(value)


def equal(a: Any, b: Any) -> bool:
    """JSON equality: `1 == 1.0`, but a boolean never equals a number, all the way down."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    try:
        return a == b
    except Exception:
        return False


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:([zZ])|([+-])(\d{2}):(\d{2}))", re.ASCII)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# RFC 3339 appendix A: a duration.
_DUR_TIME = r"T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S)"
_DURATION = re.compile(rf"P(?:(?:\d+Y(?:\d+M(?:\d+D)?)?|\d+M(?:\d+D)?|\d+D)(?:{_DUR_TIME})?"
                       rf"|{_DUR_TIME}|\d+W)", re.ASCII)
# RFC 3986's grammar, written out.
_UNRESERVED, _PCT, _SUB = r"A-Za-z0-9\-._~", r"%[0-9A-Fa-f]{2}", r"!$&'()*+,;="
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB}:@]|{_PCT})"
_AUTHORITY = (rf"(?:(?:[{_UNRESERVED}{_SUB}:]|{_PCT})*@)?"
              rf"(?:\[(?P<literal>[^\]]*)\]|(?:[{_UNRESERVED}{_SUB}]|{_PCT})*)(?::\d*)?")
_TAIL = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_URI = re.compile(rf"[A-Za-z][A-Za-z0-9+\-.]*:(?://{_AUTHORITY}(?:/{_PCHAR}*)*"
                  rf"|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_PCHAR}+(?:/{_PCHAR}*)*|){_TAIL}",
                  re.ASCII)
_RELATIVE = re.compile(rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
                       rf"|(?:[{_UNRESERVED}{_SUB}@]|{_PCT})+(?:/{_PCHAR}*)*|){_TAIL}",
                       re.ASCII)
_ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]"
_LOCAL = re.compile(rf"{_ATEXT}+(?:\.{_ATEXT}+)*|\"(?:[\x20\x21\x23-\x5b\x5d-\x7e]"
                    rf"|\\[\x20-\x7e])*\"", re.ASCII)
_IDN_LOCAL = re.compile(r"(?:[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]|[^\x00-\x7f])+"
                        r"(?:\.(?:[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]|[^\x00-\x7f])+)*"
                        r"|\"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|[^\x00-\x7f]|\\[\x20-\x7e])*\"")
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)
_IPV4 = re.compile(r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
                   r"(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}", re.ASCII)
_POINTER = re.compile(r"(?:/(?:[^~/]|~[01])*)*")


def _is_date(text: str) -> bool:
    import datetime
    if not _DATE.fullmatch(text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_time(text: str, date_ok: bool = True) -> bool:
    """RFC 3339's full-time: the offset required; a leap second only at 23:59 UTC."""
    m = _TIME.fullmatch(text)
    if not m:
        return False
    h, mi, s = int(m[1]), int(m[2]), int(m[3])
    oh, om = (int(m[6]), int(m[7])) if m[5] else (0, 0)
    if h > 23 or mi > 59 or s > 60 or oh > 23 or om > 59:
        return False
    if s == 60:
        sign = -1 if m[5] == "+" else 1
        minutes = (h * 60 + mi + sign * (oh * 60 + om)) % (24 * 60)
        return minutes == 23 * 60 + 59
    return True


def _is_datetime(text: str) -> bool:
    head, sep, tail = text[:10], text[10:11], text[11:]
    return sep in ("T", "t") and _is_date(head) and _is_time(tail)


def _is_hostname(text: str) -> bool:
    """RFC 1123: dot-separated labels of letters, digits and inner hyphens, 253 at most;
    an A-label (xn--) must be valid Punycode."""
    if not text or len(text) > 253:
        return False
    for label in text.split("."):
        if not _LABEL.fullmatch(label):
            return False
        if label[2:4] == "--" and label[:4].lower() != "xn--":
            return False   # RFC 5891 4.2.3.1: hyphens in both third and fourth places
        if label[:4].lower() == "xn--":
            try:
                label[4:].encode("ascii").decode("punycode")
            except (UnicodeError, ValueError):
                return False
    return True


def _is_ipv6(text: str) -> bool:
    import ipaddress
    if not text.isascii() or "%" in text or not re.fullmatch(r"[0-9A-Fa-f:.]+", text):
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _is_email(text: str, idn: bool = False) -> bool:
    """RFC 5321's Mailbox (RFC 6531's for idn-email): a dot-atom or quoted local part, a
    host name or an address literal."""
    local, at, domain = text.rpartition("@")
    if not at or not (_IDN_LOCAL if idn else _LOCAL).fullmatch(local):
        return False
    if domain.startswith("[") and domain.endswith("]"):
        inner = domain[1:-1]
        return bool(_IPV4.fullmatch(inner)) or (inner[:5] == "IPv6:" and _is_ipv6(inner[5:]))
    if idn:
        try:
            domain = domain.encode("idna").decode("ascii")
        except UnicodeError:
            return False
    return _is_hostname(domain)


def _is_uri(text: str, relative: bool = False) -> bool:
    m = _URI.fullmatch(text) or (_RELATIVE.fullmatch(text) if relative else None)
    if not m:
        return False
    literal = m["literal"]
    return literal is None or _is_ipv6(literal) or \
        bool(re.fullmatch(r"v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+", literal))


def _is_regex(text: str) -> bool:
    try:
        re.compile(text)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    "date": _is_date, "time": _is_time, "date-time": _is_datetime,
    "duration": lambda t: bool(_DURATION.fullmatch(t)),
    "email": _is_email, "idn-email": lambda t: _is_email(t, idn=True),
    "hostname": _is_hostname, "ipv4": lambda t: bool(_IPV4.fullmatch(t)), "ipv6": _is_ipv6,
    "uri": _is_uri, "uri-reference": lambda t: _is_uri(t, relative=True),
    "uuid": lambda t: bool(_UUID.fullmatch(t)), "regex": _is_regex,
    "json-pointer": lambda t: bool(_POINTER.fullmatch(t))}

#: For a Python annotation (`datetime.time`, the spec's forms) a time may be naive, as Python's.
PYTHON_FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    **FORMAT_CHECKS, "time": lambda t: _is_time(t) or _is_time(t + "Z")}

#: OpenAPI's numeric formats: known (no warning), checked as the bounds they name.
OPENAPI_FORMATS: dict[str, tuple] = {
    "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1),
    "float": (None, None), "double": (None, None)}
