"""`agentic_programming.decision`, the original path of the facade `openprogram.decision`."""
from ..decision import *  # noqa: F401,F403
from ..decision import __all__, __dir__, __getattr__  # noqa: F401  (its lazily loaded names too)
