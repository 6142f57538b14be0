"""Public names behave as written (issue 28): `openprogram.decision` imports as a module, and a
`Variant` with a way of asking that does not exist is refused where it is written."""
import importlib
import subprocess
import sys

import pytest

from openprogram import ArgumentError, Variant, decision
from openprogram.runtimes import ScriptedRuntime


def test_import_openprogram_decision_is_the_decision_facade():
    module = importlib.import_module("openprogram.decision")
    assert module is decision
    assert module.make("Pick.", ["stay", "go"], runtime=ScriptedRuntime(['{"call": "go"}'])) == "go"


def test_import_openprogram_decision_works_in_a_fresh_interpreter():
    code = ("import openprogram.decision as d; from openprogram.decision import make; "
            "import openprogram; print(d is openprogram.decision and make is d.make)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.stdout.strip() == "True", out.stderr


def test_a_variant_with_an_unknown_mode_is_refused_when_written():
    with pytest.raises(ArgumentError, match="unknown mode 'bogus'.*'menu'"):
        Variant(mode="bogus")
    assert Variant(mode="tools").mode == "tools"


def test_the_package_exports_the_decision_and_evaluation_functions_and_result_classes():
    import openprogram
    from openprogram.decision import entry
    from openprogram.decision import recheck as revalidate
    from openprogram.evaluation import comparison
    from openprogram.evaluation import results as evaluate_results
    assert openprogram.make is entry.make and openprogram.amake is entry.amake
    assert openprogram.evaluate is decision.evaluate and openprogram.aevaluate is decision.aevaluate
    assert openprogram.revalidate is decision.revalidate
    assert openprogram.EvaluationResult is evaluate_results.EvaluationResult
    assert openprogram.ComparisonResult is comparison.ComparisonResult
    assert openprogram.Revalidation is revalidate.Revalidation
    assert decision.Retry is openprogram.Retry and decision.Variant is openprogram.Variant
    for module in (openprogram, decision):
        assert all(hasattr(module, name) for name in module.__all__)


def test_dir_shows_the_public_names_only():
    import openprogram
    for module in (openprogram, decision):
        names = dir(module)
        assert names == sorted(module.__all__)
        assert "lazy_names" not in names and "annotations" not in names


def test_the_repair_record_is_exported_beside_the_other_records():
    import openprogram
    from openprogram.decision import repair
    from openprogram.trace import records
    assert openprogram.Repair is decision.Repair is repair.Repair is records.Repair
    rt = ScriptedRuntime(["{'call': 'go',}"])
    decision.make("Pick.", ["stay", "go"], runtime=rt)
    repairs = decision.last_trace().attempts[0].repairs
    assert [r.kind for r in repairs] == ["single_quotes", "single_quotes", "trailing_comma"]
    assert all(type(r) is openprogram.Repair for r in repairs)
