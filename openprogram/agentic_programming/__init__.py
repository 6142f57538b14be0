"""The mechanism: decision, runtime, agent, trace."""
from . import usertypes as _usertypes  # noqa: F401  registers the user's classes as options
from . import tooldefs as _tooldefs  # noqa: F401  registers tool definitions as options
from .function import agentic_function

__all__ = ["agentic_function"]
