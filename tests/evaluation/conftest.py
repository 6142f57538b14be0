"""Fixtures for the evaluate tests: everything runs on ScriptedRuntime, offline."""
import matplotlib
import pytest

matplotlib.use("Agg")  # plot() tests draw off-screen


@pytest.fixture
def frame():
    import pandas as pd
    return pd.DataFrame({
        "message": ["please refund me", "escalate this", "just saying hi", "refund again",
                    "garbage in", "typo here"],
        "label": ["refund", "escalate", "ignore", "escalate", "ignore", "ignore"],
    })


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt
    plt.close("all")
