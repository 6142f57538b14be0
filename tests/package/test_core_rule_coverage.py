"""Every rule of docs/rules.md has at least one test that carries its marker.

The rule ids are read from docs/rules.md, the repository's own rules document (a line
`- P7 ...` states rule P7). Every id the specification this project was built from numbers
(../shared/spec/CONTRACT.md) must be in docs/rules.md too: a clone has not the specification
beside it, so its ids are kept here (CONTRACT_IDS), and checked against the file wherever it is
beside the checkout. The test modules are read with `ast`, so the check holds however pytest was
invoked (one file, `-k`, or the whole suite).
"""
import ast
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
_RULE_LINE = re.compile(r"^- ([A-Z]\d+) ", flags=re.M)


def rule_ids(path: Path) -> list[str]:
    """The ids of the rules stated in a rules document, in order."""
    return _RULE_LINE.findall(path.read_text(encoding="utf-8"))


RULES = rule_ids(REPO / "docs" / "rules.md")
#: The rule ids of ../shared/spec/CONTRACT.md, in its order.
CONTRACT_IDS = ("E1 E2 E3 E4 O1 O2 O3 O4 S1 S2 S3 R1 R2 R3 P1 P2 P3 P4 P5 P6 P7 P8 Z1 Z2 "
                "A1 A2 A3 A4 A5 A6 A7 A8").split()


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
    """(file, test name, rule ids) for every test function under tests/."""
    out = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name.startswith("test_"):
                ids = [i for d in node.decorator_list for i in _rule_ids(d)]
                out.append((path, node.name, ids))
    return out


def test_the_rules_document_numbers_each_group_in_order():
    assert len(RULES) == len(set(RULES)), f"a rule id appears twice: {RULES}"
    groups: dict = {}
    for rule in RULES:
        groups.setdefault(rule[0], []).append(int(rule[1:]))
    assert set(groups) == set("EOSRPZA")
    for letter, numbers in groups.items():
        assert numbers == list(range(1, len(numbers) + 1)), f"group {letter}: {numbers}"


def test_the_rules_document_has_every_rule_of_the_contract():
    # The specification sits beside the checkout (../shared/spec), or beside the folder that
    # holds a worktree of it; a clone on its own has none, and reads the ids kept here.
    found = [p / "shared" / "spec" / "CONTRACT.md" for p in REPO.parents
             if (p / "shared" / "spec" / "CONTRACT.md").is_file()]
    for contract in found[:1]:
        assert rule_ids(contract) == CONTRACT_IDS, \
            f"the rules of {contract} changed: copy its ids into CONTRACT_IDS here"
    missing = sorted(set(CONTRACT_IDS) - set(RULES))
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
    """The marker is registered and carried by the collected items: those of this session, or,
    when it collected none of the marked tests (this file alone, `-k`), those a pytest of their
    own collects by the marker, with unregistered markers refused."""
    assert "rule(id)" in " ".join(request.config.getini("markers"))
    marked = {name: ids for _, name, ids in marked_tests() if ids}
    files = sorted({str(f) for f, _, ids in marked_tests() if ids})
    items = [i for i in request.session.items if i.get_closest_marker("rule") is not None]
    if items:
        ids = {m.args[0] for i in items for m in i.iter_markers("rule")}
    else:
        got = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                              "--strict-markers", "-m", "rule", "-p", "no:cacheprovider",
                              *files], capture_output=True, text=True, cwd=REPO)
        assert got.returncode == 0, got.stdout + got.stderr
        names = {line.split("::")[-1].split("[")[0] for line in got.stdout.splitlines()
                 if "::" in line}
        assert names == set(marked)
        ids = {i for name in names for i in marked[name]}
    assert ids and ids <= set(RULES)



def test_the_readme_cites_the_rules_and_links_only_to_files_of_the_repository():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert "docs/rules.md" in targets
    assert "CONTRACT.md" not in readme  # the specification is not part of a clone
    # an anchor is in the README itself
    local = [t.split("#")[0] for t in targets if not re.match(r"https?://|#", t)]
    outside = [t for t in local if not (REPO / t).is_file() or
               REPO.resolve() not in (REPO / t).resolve().parents]
    assert not outside, f"README links to files not in the repository: {outside}"
