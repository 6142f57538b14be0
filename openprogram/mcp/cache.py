"""The MCP result cache: tool results kept in a JSON file by (server, tool, arguments), so
a notebook run again does not call its servers again (`connect(..., cache=)`).
"""
from __future__ import annotations

import os
import threading

from ..base.errors import (
    UsageError,
)
from ..base.jsonl import LineFormat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

class _ResultCache:
    """Tool results kept in a JSON file by (server, tool, arguments), so a notebook run again
    does not call its servers again: `connect(..., cache="tools.json")`. The SDK's
    CallToolResult is kept whole (an error result too) and read back as one. The file is one
    JSON object, written whole on one line by the shared writer (base/jsonl.py), so every secret
    of this process is masked in it — a result, or the arguments of its key, that holds a key a
    server echoed is kept in memory only — and replaced at once, never half written. Delete the
    file (or a key of it) to call the server again."""

    _FORMAT = LineFormat()

    def __init__(self, path: Any):
        import json
        self.path = os.fspath(path)
        self.lock = threading.Lock()
        try:
            with open(self.path, encoding="utf-8") as f:
                self.entries = json.load(f)
        except FileNotFoundError:
            self.entries = {}
        except (OSError, ValueError) as exc:
            raise UsageError(f"the MCP result cache {self.path!r} cannot be read ({exc}): "
                             f"delete it, or give another path") from None
        if not isinstance(self.entries, dict):
            raise UsageError(f"the MCP result cache {self.path!r} is not a JSON object: "
                             f"delete it, or give another path")

    @staticmethod
    def key(server: str, tool: str, arguments: dict) -> str:
        import json
        return json.dumps([server, tool, arguments], sort_keys=True, ensure_ascii=False)

    def get(self, key: str) -> Any:
        kept = self.entries.get(key)
        if kept is None:
            return None
        from mcp.types import CallToolResult
        return CallToolResult.model_validate(kept)

    def put(self, key: str, result: Any) -> None:
        with self.lock:
            self.entries[key] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            tmp = f"{self.path}.tmp"
            with open(tmp, "wb") as f:
                f.write(self._FORMAT.line(self.entries))
            os.replace(tmp, self.path)  # never a half-written cache
