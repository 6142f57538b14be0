"""The mechanism: decision, runtime, agent, trace."""
from .function import agentic_function

__all__ = ["agentic_function"]
