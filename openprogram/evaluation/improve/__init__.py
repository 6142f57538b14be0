"""`decision.improve`: an option set made better from labelled rows, keeping only what held-out
rows show helps. `search` is the search (the split, the candidates, the paired test, the budget,
the combinations, the report); `proposers` is where rewritten descriptions and names come from.
"""
from __future__ import annotations

from .proposers import keyword_proposer
from .report import Improvement
from .search import MIN_ROWS, aimprove, improve

__all__ = ["improve", "aimprove", "Improvement", "keyword_proposer", "MIN_ROWS"]
