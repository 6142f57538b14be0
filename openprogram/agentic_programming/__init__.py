"""The original OpenProgram project's import paths, kept so its code runs unchanged: each module
here only re-exports where the concept lives now (`openprogram.decision`, `openprogram.runtime`)."""
from ..runtime.function import agentic_function

__all__ = ["agentic_function"]
