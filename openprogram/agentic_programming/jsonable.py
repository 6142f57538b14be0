"""PLACEHOLDER (replaced by the docsfn branch): values as JSON."""
from __future__ import annotations

import json
from typing import Any


def to_jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return {"repr": repr(value)[:500], "type": type(value).__name__}
