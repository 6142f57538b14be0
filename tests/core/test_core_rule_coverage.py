"""Every rule of the decision contract has at least one test that carries its marker.

The rule list is copied here from CONTRACT.md because CI may run without the shared folder beside
the repository. The test modules are read with `ast`, so the check holds however pytest was
invoked (one file, `-k`, or the whole suite).
"""
import ast
from pathlib import Path

RULES = (
    ["E1", "E2", "E3", "E4"]
    + ["O1", "O2", "O3", "O4"]
    + ["S1", "S2", "S3"]
    + ["R1", "R2", "R3"]
    + [f"P{i}" for i in range(1, 9)]
    + ["Z1", "Z2"]
    + [f"A{i}" for i in range(1, 9)]
)
HERE = Path(__file__).resolve().parent


def _rule_ids(decorator):
    """The ids of a `@pytest.mark.rule("X", ...)` decorator, else []."""
    if not isinstance(decorator, ast.Call):
        return []
    func = decorator.func
    if not (isinstance(func, ast.Attribute) and func.attr == "rule"
            and isinstance(func.value, ast.Attribute) and func.value.attr == "mark"):
        return []
    return [a.value for a in decorator.args if isinstance(a, ast.Constant)]


def marked_tests():
    """(file, test name, rule ids) for every test function in tests/core."""
    out = []
    for path in sorted(HERE.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name.startswith("test_"):
                ids = [i for d in node.decorator_list for i in _rule_ids(d)]
                out.append((path.name, node.name, ids))
    return out


def test_rule_list_matches_the_contract_when_it_is_present():
    contract = HERE.parents[2] / "shared" / "spec" / "CONTRACT.md"
    if not contract.exists():  # CI runs in a clone: the copied list above is what counts
        return
    import re
    text = contract.read_text(encoding="utf-8")
    in_contract = set(re.findall(r"^- ([A-Z]\d+) ", text, flags=re.M))
    assert in_contract == set(RULES)


def test_every_rule_has_a_marked_test():
    covered = {}
    for _, name, ids in marked_tests():
        for i in ids:
            covered.setdefault(i, []).append(name)
    missing = [r for r in RULES if r not in covered]
    assert not missing, f"rules with no @pytest.mark.rule test: {missing}"
    unknown = sorted(set(covered) - set(RULES))
    assert not unknown, f"markers naming no contract rule: {unknown}"


def test_every_marked_test_names_its_rules():
    wrong = [(f, name, ids) for f, name, ids in marked_tests()
             if ids and not all(f"_{i}_" in name + "_" for i in ids)]
    assert not wrong, f"put the rule id in the test name: {wrong}"


def test_the_markers_reach_pytest(request):
    """The marker is registered and carried by the collected items."""
    items = [i for i in request.session.items if i.get_closest_marker("rule") is not None]
    if len(request.session.items) <= 1:  # run alone: nothing else was collected
        return
    ids = {m.args[0] for i in items for m in i.iter_markers("rule")}
    assert ids <= set(RULES)
    assert "rule(id)" in " ".join(request.config.getini("markers"))

