"""What a server answers besides tools, read as the protocol says (`_LISTINGS`,
`_validated`), and a server's failure as a `ServerError` naming it, its secrets masked.
"""
from __future__ import annotations

from ..base.errors import (
    ServerError,
)
from ..base.text import cut

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: What `Connection` lists beside tools: kind -> (method, the session's method, the result's
#: field, the SDK's model of one item, the server capability that says it has them).
_LISTINGS = {
    "resources": ("resources/list", "list_resources", "resources", "Resource", "resources"),
    "resource_templates": ("resources/templates/list", "list_resource_templates",
                           "resource_templates", "ResourceTemplate", "resources"),
    "prompts": ("prompts/list", "list_prompts", "prompts", "Prompt", "prompts"),
}


def _validated(model: Any, data: Any, where: str) -> Any:
    """`data` (JSON data a server sent, or its recording) as the SDK's `model`; data that does
    not fit is the server's fault, named, never a bare pydantic error."""
    import pydantic
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ServerError(f"{where}: {_off_protocol(exc)}") from None


def _off_protocol(exc: Any) -> str:
    """A pydantic error about what a server sent, in a line: how many problems, the first."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    at = ".".join(map(str, first.get("loc") or ())) or "(the whole of it)"
    return (f"what the server sent does not follow the MCP protocol ({len(errors)} problem(s) "
            f"for the SDK's {exc.title}; the first at {at}: "
            f"{cut(str(first.get('msg') or exc), 200, '')}). The server is at fault: report it "
            f"to its authors")


def _server_failure(exc: BaseException, what: str, mask: Any) -> ServerError:
    """A failed request to a server as a `ServerError` saying `what` and why (the server's own
    message for a JSON-RPC error), with the connection's tokens masked."""
    import anyio
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED
    if isinstance(exc, MCPError):
        if getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED:
            return ServerError(f"{what}: the connection closed (the server ended?): connect "
                               f"again")
        said = getattr(getattr(exc, "error", None), "message", None) or str(exc)
        return ServerError(f"{what}: the server answered with an error: "
                           f"{cut(mask(said), 2000, '')}")
    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError,
                        anyio.EndOfStream)):
        return ServerError(f"{what}: the connection is closed (the server ended?): connect "
                           f"again")
    import pydantic
    if isinstance(exc, pydantic.ValidationError):
        return ServerError(f"{what}: {mask(_off_protocol(exc))}")
    return ServerError(f"{what}: {mask(_reason(exc))}")


def _credential(header: str) -> str:
    """What is masked of a credential header's value (`Bearer <token>`): the credential after
    its scheme; masking the whole value would also mask any eight characters of it, "Bearer t"
    among them, in text that only talks about bearer tokens."""
    scheme, _, rest = header.partition(" ")
    rest = rest.strip()
    plain = scheme.isascii() and scheme.replace("-", "").isalnum() and len(rest) >= 8
    return rest if plain else header


def _reason(exc: BaseException) -> str:
    """The first real error inside an exception group (anyio's task groups wrap them)."""
    groups = getattr(__import__("builtins"), "BaseExceptionGroup", ())  # Python 3.11+
    while groups and isinstance(exc, groups) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {cut(str(exc) or '(no message)', 500, '')}"
