"""`LlamaCppRuntime`, a GGUF model run in this process by llama.cpp: the runtime and its generation
loop (`runtime`, where its use is described), how it draws tokens and when a reply stops
(`sampling`), how a decision's conversation is laid out for the model (`layout`), the model files
and the loaded models it shares across the process (`models`), the schema, brief and grammar of
json_schema mode (`grammar`), and the exact probability of every option's name (`confidence`);
this package gives the names the rest of the library and users import, as the single module
before it did."""
from .confidence import CONFIDENCE_EVALS_PER_NAME, CONFIDENCE_TOLERANCE, _NameOdds
from .grammar import (
    ARRAY_MAX_ITEMS,
    BRIEF_INSTRUCTION,
    SCHEMA_FORMS,
    SCHEMA_INSTRUCTION,
    STRING_MAX_LENGTH,
    bounded_schema,
    decision_grammar,
    schema_brief,
)
from .layout import LAYOUTS
from .models import (
    BUNDLED_FILE,
    BUNDLED_PACKAGE,
    DEFAULT_MAX_CTX,
    MIN_PREFIX_TOKENS,
    PREFIX_CACHE_BYTES,
    _PrefixStates,
    bundled_model_path,
    machine_settings,
)
from .runtime import LlamaCppRuntime
from .sampling import _Sampler

__all__ = ["LlamaCppRuntime", "bundled_model_path", "bounded_schema", "decision_grammar",
           "machine_settings", "STRING_MAX_LENGTH", "ARRAY_MAX_ITEMS", "LAYOUTS",
           "PREFIX_CACHE_BYTES"]

# `_Sampler`, `_PrefixStates` and `_NameOdds` are named here too: the docs, the tests and
# benchmarks/bench_local.py reach them as `llamacpp._Sampler`, as before the package was split.
