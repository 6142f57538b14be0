"""`agentic_programming.agent`, the original path of `Agent` and `agent()`."""
from ..runtime.agent import *  # noqa: F401,F403
from ..runtime.agent import __all__  # noqa: F401
