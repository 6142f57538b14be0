"""A decision's settings are defined once (decision/settings.py) and every entry point takes
exactly the ones docs/api.md says it takes: its signature lists them with their defaults, it
accepts each, and it refuses a keyword it does not take before any model call."""
import ast
import inspect
import re
from pathlib import Path

import pytest

import openprogram
from openprogram import decision
from openprogram.decision import settings as S
from openprogram.runtimes import ScriptedRuntime

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"
OPTIONS = {"go": ("GO", "go on"), "stop": ("STOP", "stop here")}
PICK = '{"call": "go"}'


def documented() -> tuple[dict[str, tuple[str, str]], dict[str, set[str]]]:
    """The page's table ({keyword: (default, what it does)}) and its list of which entry points
    take which ({entry point: keywords})."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## The settings of a decision", 1)[1].split("\n## ", 1)[0]
    table = {m.group(1): (m.group(2), m.group(3).replace("\\|", "|"))
             for m in re.finditer(r"^\| `(\w+)` \| `([^`]*)` \| (.*) \|$", section, re.M)}
    takes: dict[str, set[str]] = {}
    for line in section.splitlines():
        m = re.match(r"- ((?:`[^`]+`(?:, )?)+): (.*)", line)
        if m is None:
            continue
        names = re.findall(r"`([^`]+)`", m.group(1))
        said = m.group(2)
        if said.startswith("every one but"):
            keys = set(S.ALL) - set(re.findall(r"`(\w+)`", said.split("(")[0]))
        elif said.startswith("every one"):
            keys = set(S.ALL)
        else:
            keys = set(re.findall(r"`(\w+)`", said))
        for n in names:
            takes[n] = keys
    return table, takes


def test_the_page_describes_each_setting_as_it_is_defined():
    table, _ = documented()
    assert list(table) == [s.name for s in S.SETTINGS]
    for s in S.SETTINGS:
        assert table[s.name] == (repr(s.default), s.doc)


def test_the_type_checkers_keywords_are_the_settings():
    # `Keywords` (for `**settings: Unpack[Keywords]`) exists only for type checkers: read it
    tree = ast.parse((ROOT / "openprogram" / "decision" / "settings.py").read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "Keywords")
    fields = [(n.target.id, ast.unparse(n.annotation)) for n in cls.body
              if isinstance(n, ast.AnnAssign)]
    assert fields == [(s.name, s.annotation) for s in S.SETTINGS]


def entry_points():
    from openprogram.evaluation.variants import Variant
    return {"make": decision.make, "amake": decision.amake, "evaluate": decision.evaluate,
            "aevaluate": decision.aevaluate, "agent": openprogram.agent,
            "aagent": openprogram.aagent, "Runtime.exec": openprogram.Runtime.exec,
            "Runtime.aexec": openprogram.Runtime.aexec, "compare": decision.compare,
            "acompare": decision.acompare, "Variant": Variant,
            "parse_args": decision.parse_args, "revalidate": decision.revalidate,
            "improve": decision.improve, "plan": decision.plan}


@pytest.mark.parametrize("name", list(entry_points()))
def test_each_signature_lists_the_settings_the_page_says_it_takes(name):
    fn = entry_points()[name]
    _, takes = documented()
    params = inspect.signature(fn).parameters
    listed = {p for p in params if p in S.ALL}
    assert listed == takes[name]
    defaults = {s.name: s.default for s in S.SETTINGS}
    for p in listed:   # a Variant's are all None: each unset one comes from compare
        assert params[p].default == (None if name == "Variant" else defaults[p]), p
        assert params[p].kind in (inspect.Parameter.KEYWORD_ONLY,
                                  inspect.Parameter.POSITIONAL_OR_KEYWORD)
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    if name != "Variant":   # help() says what each one does
        for p in listed:
            assert f"{p}: " in fn.__doc__


def calls(name, **settings):
    """A call of entry point `name` that makes (or would make) one cheap decision."""
    rt = ScriptedRuntime([PICK] * 4)
    rows = [{"m": "x"}]
    settings = {k: (rt if k == "runtime" else v) for k, v in settings.items()}
    own = {"runtime": rt} if "runtime" not in settings and name not in (
        "Runtime.exec", "Runtime.aexec", "parse_args", "revalidate", "Variant", "plan") else {}
    import asyncio
    return {
        "make": lambda: decision.make("Pick.", OPTIONS, **own, **settings),
        "amake": lambda: asyncio.run(decision.amake("Pick.", OPTIONS, **own, **settings)),
        "evaluate": lambda: decision.evaluate("{m}", OPTIONS, rows, progress=False, **own,
                                              **settings),
        "aevaluate": lambda: asyncio.run(decision.aevaluate("{m}", OPTIONS, rows,
                                                            progress=False, **own,
                                                            **settings)),
        "agent": lambda: openprogram.agent("Pick.", options=OPTIONS, **own, **settings),
        "aagent": lambda: asyncio.run(openprogram.aagent("Pick.", options=OPTIONS, **own,
                                                         **settings)),
        "Runtime.exec": lambda: rt.exec("Pick.", options=OPTIONS, **settings),
        "Runtime.aexec": lambda: asyncio.run(rt.aexec("Pick.", options=OPTIONS, **settings)),
        "compare": lambda: decision.compare("{m}", {"a": OPTIONS, "b": OPTIONS}, rows,
                                            progress=False, **own, **settings),
        "acompare": lambda: asyncio.run(decision.acompare("{m}", {"a": OPTIONS, "b": OPTIONS},
                                                          rows, progress=False, **own,
                                                          **settings)),
        "Variant": lambda: entry_points()["Variant"](**settings),
        "parse_args": lambda: decision.parse_args(PICK, OPTIONS, **settings),
        "revalidate": lambda: decision.revalidate(decision.last_trace(), OPTIONS, **settings),
        "improve": lambda: decision.improve("{m}", OPTIONS, [{"m": "x", "e": "go"}] * 2,
                                            expected="e", holdout=0, **own, **settings),
        "plan": lambda: decision.plan("{m}", OPTIONS, **settings).resolve(rows[0], PICK),
    }[name]


def written(name):
    """Each setting written out, at its default (a Variant's: a value it may override with)."""
    values = {s.name: s.default for s in S.SETTINGS}
    if name == "Variant":
        values.update(mode="menu", max_retries=1, repair="safe", confidence=False)
    return values


#: A value of each setting that is not its default, for a keyword an entry point refuses.
OTHER = {"runtime": ScriptedRuntime([]), "context": {}, "max_retries": 2, "timeout_s": 5.0,
         "validate": bool, "reask": "{error}", "mode": "tools", "confidence": True,
         "min_confidence": 0.5, "low_confidence": "stop", "repair": "off", "shortlist": 1,
         "pick_set": object(),   # (an entry point that does not take it refuses it by name)
         "max_retrys": 2}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(entry_points()))
def test_each_entry_point_accepts_every_setting_it_takes_and_refuses_the_others(name):
    _, takes = documented()
    decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime([PICK]))  # a trace to revalidate
    values = written(name)
    calls(name, **{k: values[k] for k in takes[name]})()
    for other in sorted((set(S.ALL) - takes[name]) | {"max_retrys"}):
        with pytest.raises(TypeError, match=re.escape(other)):
            calls(name, **{other: OTHER[other]})()


def test_the_magics_flags_are_the_settings_the_page_says_they_take():
    magics = pytest.importorskip("openprogram.widgets.magics")
    _, takes = documented()
    flags = {"timeout": "timeout_s"}  # the one flag named otherwise
    for magic in ("decide", "agent"):
        parser = getattr(magics.DecisionMagics, magic).parser
        dests = {flags.get(a.dest, a.dest) for a in parser._actions}
        assert dests & set(S.ALL) == takes[f"%%{magic}"], magic


def test_settings_are_checked_once_and_frozen():
    s = S.Settings.of({"mode": "tools", "repair": "menu", "max_retries": 2})
    assert (s.mode.name, s.repair.name, s.attempts) == ("tools", "menu", 3)
    assert s.keywords() == {"mode": "tools", "repair": "menu", "max_retries": 2}
    with pytest.raises(AttributeError, match="frozen"):
        s.mode = "menu"
    assert s.replace(max_retries=0).attempts == 1 and s.attempts == 3
    with pytest.raises(openprogram.ArgumentError, match="unknown repair level 'all'"):
        S.Settings.of({"repair": "all"})
    with pytest.raises(openprogram.UsageError, match="needs confidence=True"):
        S.Settings.of({"min_confidence": 0.5})
