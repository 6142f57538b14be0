"""Shared pytest setup. Kept minimal on purpose: every engineer's tests load it, so nothing heavy
(no notebook layer, no pandas, no servers) is imported or started here."""
import sys
from pathlib import Path

# Test helpers live next to their tests (tests/core/conftest.py etc.); the repository root on the
# path lets a test import the package's source tree even before `pip install -e .`.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
