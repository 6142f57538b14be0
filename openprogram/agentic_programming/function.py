"""`agentic_programming.function.agentic_function`, the original path of the decorator."""
from ..runtime.function import *  # noqa: F401,F403
from ..runtime.function import __all__  # noqa: F401
