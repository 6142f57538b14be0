"""Every rule of docs/rules.md has at least one test that carries its marker.

The rule ids are read from docs/rules.md, the repository's own rules document (a line
`- P7 ...` states rule P7). When the specification this project was built from sits beside the
repository (../shared/spec/CONTRACT.md), every id it numbers must be in docs/rules.md too. The test
modules are read with `ast`, so the check holds however pytest was invoked (one file, `-k`, or the
whole suite).
"""
import ast
import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
_RULE_LINE = re.compile(r"^- ([A-Z]\d+) ", flags=re.M)


def rule_ids(path: Path) -> list[str]:
    """The ids of the rules stated in a rules document, in order."""
    return _RULE_LINE.findall(path.read_text(encoding="utf-8"))


RULES = rule_ids(REPO / "docs" / "rules.md")


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


def test_the_rules_document_numbers_each_group_in_order():
    assert len(RULES) == len(set(RULES)), f"a rule id appears twice: {RULES}"
    groups: dict = {}
    for rule in RULES:
        groups.setdefault(rule[0], []).append(int(rule[1:]))
    assert set(groups) == set("EOSRPZA")
    for letter, numbers in groups.items():
        assert numbers == list(range(1, len(numbers) + 1)), f"group {letter}: {numbers}"


def test_the_rules_document_has_every_rule_of_the_contract_when_it_is_present():
    # The specification sits beside the checkout (../shared/spec), or beside the folder that
    # holds a worktree of it; a clone on its own has none, and docs/rules.md is the whole list.
    found = [p / "shared" / "spec" / "CONTRACT.md" for p in REPO.parents
             if (p / "shared" / "spec" / "CONTRACT.md").is_file()]
    if not found:
        pytest.skip("no shared/spec/CONTRACT.md beside this checkout: docs/rules.md is the whole list")
    contract = found[0]
    assert rule_ids(contract), f"no '- X1 ...' rule lines found in {contract}"
    missing = sorted(set(rule_ids(contract)) - set(RULES))
    assert not missing, f"rules of CONTRACT.md that docs/rules.md does not state: {missing}"


def test_every_rule_has_a_marked_test():
    covered = {}
    for _, name, ids in marked_tests():
        for i in ids:
            covered.setdefault(i, []).append(name)
    missing = [r for r in RULES if r not in covered]
    assert not missing, f"rules with no @pytest.mark.rule test: {missing}"
    unknown = sorted(set(covered) - set(RULES))
    assert not unknown, f"markers naming no rule of docs/rules.md: {unknown}"


def test_every_marked_test_names_its_rules():
    wrong = [(f, name, ids) for f, name, ids in marked_tests()
             if ids and not all(f"_{i}_" in name + "_" for i in ids)]
    assert not wrong, f"put the rule id in the test name: {wrong}"


def test_the_markers_reach_pytest(request):
    """The marker is registered and carried by the collected items."""
    items = [i for i in request.session.items if i.get_closest_marker("rule") is not None]
    if len(request.session.items) <= 1:
        pytest.skip("run alone: no other test was collected whose markers could be read")
    ids = {m.args[0] for i in items for m in i.iter_markers("rule")}
    assert ids <= set(RULES)
    assert "rule(id)" in " ".join(request.config.getini("markers"))



def test_the_readme_cites_the_rules_and_links_only_to_files_of_the_repository():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert "docs/rules.md" in targets
    assert "CONTRACT.md" not in readme  # the specification is not part of a clone
    local = [t.split("#")[0] for t in targets if not re.match(r"https?://|#", t)]  # an anchor is in the README itself
    outside = [t for t in local if not (REPO / t).is_file() or
               REPO.resolve() not in (REPO / t).resolve().parents]
    assert not outside, f"README links to files not in the repository: {outside}"
