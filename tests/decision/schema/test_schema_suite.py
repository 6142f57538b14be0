"""The official JSON-Schema-Test-Suite (draft 2020-12), case by case, through a decision.

The suite ships inside the `jsonschema` sdist (`json/tests/draft2020-12`); ./dev's test setup
downloads the sdist of the pinned version into the venv (nothing of it is committed) and the
test reads the files from that archive. Each case's schema is wrapped as the property `value` of an
object schema W (with an `$id` of its own where it has references, so that its `#...` ones
still mean its own root), W goes in as `openprogram.JsonSchema(W)`, and the scripted model
fills it with the case's data: a valid case must resolve to exactly the data, an invalid one
must fail the decision (no retries) with a parse error, and a schema the library refuses must
be one of the refusals named in REFUSED_FILES / REFUSED_CASES with the reason. Every format
file of the formats the library checks runs (`format` is asserted here, the one departure
from the specification's default, named in REFUSED_CASES).
"""
from __future__ import annotations

import json
import os
import sys
import tarfile
import warnings

import pytest

import openprogram
from openprogram import DecisionError, OptionError, OptionWarning, decision
from openprogram.runtimes import ScriptedRuntime

SUITE = "json/tests/draft2020-12/"

#: Files of the suite not run, and why.
REFUSED_FILES = {
    # Remote references: the library refuses a reference outside the document at build time
    # (the error names the URI and says to inline it under $defs); checked in test_remote_*.
    "refRemote.json": "remote references (http://localhost:1234/...)",
    # $dynamicRef / $dynamicAnchor are refused with an error naming them (test_dynamic_ref).
    "dynamicRef.json": "$dynamicRef / $dynamicAnchor are refused by name",
    # The metaschema itself is a remote document with $dynamicRef; vocabularies likewise.
    "vocabulary.json": "$vocabulary needs the metaschema documents (remote)",
    "optional/refOfUnknownKeyword.json": "reference into an unknown keyword's value",
    # Optional files: behaviour the specification leaves open.
    "optional/bignum.json": "numbers beyond a float: a reply's numbers are JSON's floats (P3)",
    "optional/float-overflow.json": "numbers beyond a float (P3)",
    "optional/ecmascript-regex.json": "patterns run with Python's re, not ECMA 262",
    "optional/format-assertion.json": "needs the format-assertion metaschema (remote)",
    "optional/cross-draft.json": "references to other drafts' metaschemas (remote)",
    "optional/dependencies-compatibility.json": "draft 7's `dependencies`, not 2020-12",
    "optional/id.json": "$id inside an enum (refused as a remote reference target)",
    "optional/unknownKeyword.json": "$id inside an unknown keyword",
    "optional/anchor.json": "$anchor inside an unknown keyword",
    "optional/no-schema.json": "no $schema: nothing 2020-12 specific",
}
_METASCHEMA = "refers to the 2020-12 metaschema, another document (a remote reference)"
_DYNAMIC = "$dynamicRef / $dynamicAnchor are refused by name"
#: Groups of a run file not run, and why: (file, the group's description) -> reason.
REFUSED_CASES = {
    ("defs.json", "validate definition against metaschema"): _METASCHEMA,
    ("ref.json", "remote ref, containing refs itself"): _METASCHEMA,
    ("optional/dynamicRef.json", "$dynamicRef skips over intermediate resources - pointer "
                                 "reference across resource boundary"): _DYNAMIC,
    ("unevaluatedItems.json", "unevaluatedItems with $dynamicRef"): _DYNAMIC,
    ("unevaluatedProperties.json", "unevaluatedProperties with $dynamicRef"): _DYNAMIC,
    # The one place this library departs from the specification's default on purpose: a
    # format it knows is asserted (the optional/format files check each exactly).
    **{("format.json", f"{f} format"): "format is asserted here, not only an annotation"
       for f in ("email", "idn-email", "regex", "ipv4", "ipv6", "hostname", "date",
                 "date-time", "time", "json-pointer", "uri", "uri-reference", "uuid",
                 "duration")},
}
#: Formats the library does not check (annotations, as the specification allows).
UNCHECKED_FORMATS = {"idn-hostname", "iri", "iri-reference", "uri-template",
                     "relative-json-pointer", "ecmascript-regex", "unknown"}


def _suite_archive() -> str:
    """The sdist of the installed (pinned) `jsonschema`, which ./dev's setup downloads into the
    venv (`setup_schema_suite`): the suite and the oracle are one version."""
    from importlib.metadata import version
    pin = version("jsonschema")
    path = os.path.join(sys.prefix, "share", "json-schema-test-suite", f"jsonschema-{pin}.tar.gz")
    assert os.path.exists(path), (
        f"{path} is missing: the official JSON-Schema-Test-Suite comes from the jsonschema "
        f"{pin} sdist, which ./dev's test setup downloads; run `./dev test --collect-only -q` "
        f"once (or: {sys.executable} -m pip download --no-deps --no-binary jsonschema "
        f"jsonschema=={pin} -d {os.path.dirname(path)})")
    return path


def _suite_files() -> dict[str, list]:
    out = {}
    with tarfile.open(_suite_archive()) as tar:
        for member in tar.getmembers():
            _, _, path = member.name.partition("/")
            if path.startswith(SUITE) and path.endswith(".json"):
                out[path[len(SUITE):]] = json.load(tar.extractfile(member))
    return out


FILES = _suite_files()


def _run_files():
    for name in sorted(FILES):
        if name in REFUSED_FILES:
            continue
        if name.startswith("optional/format/") and name[16:-5] in UNCHECKED_FORMATS:
            continue
        yield name


def wrapped(schema):
    # (only where a reference needs it: an $id sends the document to schemaeval.py, and the
    # cases without one are for validator.py's own compiler to pass too)
    if isinstance(schema, dict) and "$id" not in schema and '"$ref"' in json.dumps(schema):
        schema = {"$id": "urn:openprogram:suite-case", **schema}
    return {"type": "object", "properties": {"value": schema}, "required": ["value"]}


def outcome(schema, data):
    """'valid' (resolved to exactly the data), 'invalid' (the decision failed on the value) or
    the OptionError the option set was refused with."""
    reply = json.dumps({"call": "fill", "args": {"value": data}})
    rt = ScriptedRuntime([reply])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptionWarning)
        try:
            got = decision.make("Fill it.", {"fill": openprogram.JsonSchema(wrapped(schema))},
                                runtime=rt, max_retries=0)
        except OptionError as exc:
            return exc
        except DecisionError:
            return "invalid"
    assert got == {"decision": "fill", "value": data}, (got, data)
    assert _same_types(got["value"], data), (got, data)
    return "valid"


def _same_types(a, b):
    # 1.0 for an integer arrives as 1 (JSON's integer), equal either way; nothing else changes
    if isinstance(a, list):
        return isinstance(b, list) and all(_same_types(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and all(_same_types(a[k], b[k]) for k in a)
    return type(a) is type(b) or {type(a), type(b)} == {int, float}


@pytest.mark.parametrize("name", list(_run_files()))
def test_suite_file(name):
    wrong = []
    for group in FILES[name]:
        if (name, group["description"]) in REFUSED_CASES:
            continue
        for case in group["tests"]:
            got = outcome(group["schema"], case["data"])
            want = "valid" if case["valid"] else "invalid"
            if got != want:
                wrong.append(f"{group['description']} / {case['description']}: expected "
                             f"{want}, got {got!r}")
    assert not wrong, "\n".join(wrong)


def test_every_file_is_run_or_named():
    """A file of a newer suite is neither silently skipped nor silently run."""
    named = set(REFUSED_FILES) | {f"optional/format/{f}.json" for f in UNCHECKED_FORMATS}
    assert named <= set(FILES), sorted(named - set(FILES))
    assert len(list(_run_files())) + len(named) == len(FILES)


def test_every_refused_group_is_in_the_suite():
    groups = {(name, g["description"]) for name in FILES for g in FILES[name]}
    assert set(REFUSED_CASES) <= groups, sorted(set(REFUSED_CASES) - groups)


def test_refused_groups_are_refused_by_name():
    """What is not run is refused when the option set is built, by an error naming it."""
    for (name, description), reason in REFUSED_CASES.items():
        if reason in (_METASCHEMA, _DYNAMIC):
            group = next(g for g in FILES[name] if g["description"] == description)
            got = outcome(group["schema"], group["tests"][0]["data"])
            assert isinstance(got, OptionError), (name, description)
            assert ("$defs" in str(got) and "https://json-schema.org/draft/2020-12/schema"
                    in str(got)) if reason == _METASCHEMA else "$dynamic" in str(got)


def test_remote_reference_is_refused_by_name():
    got = outcome({"$ref": "http://localhost:1234/integer.json"}, 1)
    assert isinstance(got, OptionError)
    assert "'http://localhost:1234/integer.json'" in str(got) and "under $defs" in str(got)


def test_dynamic_ref_is_refused_by_name():
    got = outcome({"$dynamicAnchor": "a", "$dynamicRef": "#a"}, 1)
    assert isinstance(got, OptionError) and "$dynamicRef is not supported" in str(got)
