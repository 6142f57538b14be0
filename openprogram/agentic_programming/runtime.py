"""`agentic_programming.runtime`, the original path of `Runtime`."""
from ..runtime.runtime import *  # noqa: F401,F403
from ..runtime.runtime import __all__  # noqa: F401
