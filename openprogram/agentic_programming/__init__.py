"""The mechanism: decision, runtime, agent, trace."""
from . import usertypes as _usertypes  # noqa: F401  registers the user's classes as options
from .function import agentic_function

__all__ = ["agentic_function"]
