"""A JSON Schema document's references, resolved by one rule for every reader of the schema.

The validator (validator.py, schemaeval.py), the menu (reader.py), OpenAI's strict rewrite
(runtimes/providers/strict_schema.py) and the llama.cpp grammar's looser copy of a schema
(runtimes/llamacpp/loose_schema.py) all follow a `$ref` through `Document(root).resolve(ref, base)`:
draft 2020-12's rule, so that a reference means the same schema wherever it is read — a JSON Pointer
to any place in the document (percent-decoded, `~1` and `~0` unescaped, empty tokens kept:
`#/properties/a`, `#/$defs/percent%25field`), an `$anchor`, and a reference relative to the `$id` of
the resource it sits in. The document is read for `$id`s and `$anchor`s once, and only when a
reference needs them (a plain `#/...` pointer from the root is followed directly). What it cannot
follow is an `OptionError` naming the reference: another document (to be inlined under `$defs`), a
pointer to nothing, an anchor no `$anchor` defines, and — when the document is read — `$dynamicRef`
/ `$dynamicAnchor` and nesting deeper than `MAX_DEPTH`. A document placed inside another (an
option's arguments inside its pick, the picks inside json_schema mode's decision schema) keeps its
meaning through `embed`, which points each of its references at a copy of the target under the
host's root `$defs`.
"""
from __future__ import annotations

import re

from ...base.errors import OptionError
from .reply_values import json_head

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["Document", "embed", "pointer_tokens", "join_uri", "SINGLE", "LISTS", "MAPS",
           "MAX_DEPTH"]

#: The keywords whose value is one subschema, a list of them, or an object of them.
SINGLE = ("not", "if", "then", "else", "items", "contains", "additionalProperties",
          "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
#: How deep a schema may nest, its references followed: every reader of a schema (the menu, the
#: validator, the modes) walks it recursively, and 64 levels leave room in Python's stack for
#: a caller's own (a notebook, a test runner, an agent several calls deep); 200 did not.
MAX_DEPTH = 64
_ANCHOR = re.compile(r"[A-Za-z_][-A-Za-z0-9._]*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def pointer_tokens(fragment: str) -> list[str]:
    """The reference tokens of a JSON Pointer written in a URI fragment (`/a/b%25c/~1d`)."""
    return [_unescape(part) for part in fragment.split("/")[1:]]


def _unescape(token: str) -> str:
    if "%" in token:
        from urllib.parse import unquote  # (loaded only for a percent-encoded pointer)
        token = unquote(token)
    return token.replace("~1", "/").replace("~0", "~")


def join_uri(base: str, ref: str) -> str:
    """`ref` read relative to the base URI `base` (RFC 3986)."""
    if ref.startswith("#"):
        return base.partition("#")[0] + ref
    if _SCHEME.match(ref):
        return ref
    from urllib.parse import urljoin  # (loaded only for a document with $ids)
    return urljoin(base, ref)


class Document:
    """One JSON Schema document: `resolve(ref, base, ptr)` is (the node `ref` refers to, that
    node's base URI, its JSON Pointer) — `base` the base URI where the reference sits (`""`
    for a document without `$id`s), `ptr` where it sits, for the error message."""

    def __init__(self, root: Any, where: str = "the schema"):
        self.root, self.where = root, where
        self.resources: dict[str, Any] = {"": root}   # base URI -> the node that has it as $id
        self.anchors: dict[str, Any] = {}     # base URI # anchor -> node
        self.bases: dict[int, str] = {}       # id(node) -> its base URI
        self.pointers: dict[int, str] = {}    # id(node) -> its JSON Pointer, for messages
        self.nodes: list[tuple] = []          # every subschema: (node, base, pointer)
        self.scanned = False

    def fail(self, ptr: str, text: str) -> OptionError:
        return OptionError(f"{self.where}: {text} (at {ptr} of the schema)")

    def scan(self) -> Document:
        """Read every subschema once: its base URI, its pointer, the `$id`s and `$anchor`s."""
        if self.scanned:
            return self
        self.scanned = True
        stack = [(self.root, "", "#", 0)]
        while stack:
            node, base, ptr, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise self.fail(ptr, f"the schema nests deeper than {MAX_DEPTH} levels; "
                                     f"flatten it with $defs")
            if not isinstance(node, dict):
                continue
            for k in ("$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"):
                if k in node:
                    raise self.fail(ptr, f"{k} is not supported (it makes a reference depend "
                                         f"on where validation came from); write the "
                                         f"reference as $ref to a schema under $defs")
            sid = node.get("$id")
            if sid is not None:
                if not isinstance(sid, str):
                    raise self.fail(ptr, f"$id takes a URI, got {json_head(sid)}")
                base = join_uri(base, sid).partition("#")[0]
                self.resources[base] = node
            anchor = node.get("$anchor")
            if anchor is not None:
                if not isinstance(anchor, str) or not _ANCHOR.fullmatch(anchor):
                    raise self.fail(ptr, f"$anchor takes a name (a letter or _, then letters, "
                                         f"digits, -, _ or .), got {json_head(anchor)}")
                self.anchors[f"{base}#{anchor}"] = node
            self.bases[id(node)] = base
            self.pointers[id(node)] = ptr
            self.nodes.append((node, base, ptr))
            for k in SINGLE:
                if k in node:
                    stack.append((node[k], base, f"{ptr}/{k}", depth + 1))
            for k in LISTS:
                if isinstance(node.get(k), list):
                    stack += [(x, base, f"{ptr}/{k}/{i}", depth + 1)
                              for i, x in enumerate(node[k])]
            for k in MAPS:
                if isinstance(node.get(k), dict):
                    stack += [(x, base, f"{ptr}/{k}/{name}", depth + 1)
                              for name, x in node[k].items()]
        return self

    def base_of(self, node: Any, default: str = "") -> str:
        """The base URI of a subschema of the document (`default` for one not in it)."""
        return self.scan().bases.get(id(node), default)

    def resolve(self, ref: Any, base: str = "", ptr: str = "#") -> tuple[Any, str, str]:
        if not isinstance(ref, str):
            raise self.fail(ptr, f"$ref takes a URI reference, got {json_head(ref)}")
        if base == "" and not self.scanned and (ref == "#" or ref.startswith("#/")):
            # (a pointer from the root: no need to read the whole document; a caller that
            # tracks base URIs reads it first, and gets each target's own base)
            return self._walk(self.root, ref[1:], ref, "", ptr)
        self.scan()
        # (`""`: where the caller does not track bases, the reference sits in the root's)
        uri = join_uri(base or self.bases.get(id(self.root), ""), ref)
        doc_uri, _, fragment = uri.partition("#")
        doc = self.resources.get(doc_uri)
        if doc is None:
            raise self.fail(ptr, f"$ref {ref!r} refers to {doc_uri!r}, another document, "
                                 f"which is not fetched; inline that schema under $defs and "
                                 f"refer to it as #/$defs/Name")
        if fragment and not fragment.startswith("/"):
            node = self.anchors.get(f"{doc_uri}#{fragment}")
            if node is None:
                raise self.fail(ptr, f"$ref {ref!r} names the anchor {fragment!r}, which no "
                                     f"$anchor of the schema defines")
            return node, self.bases.get(id(node), doc_uri), self.pointers.get(id(node), ref)
        return self._walk(doc, fragment, ref, doc_uri, ptr)

    def _walk(self, node: Any, fragment: str, ref: str, doc_uri: str,
              ptr: str) -> tuple[Any, str, str]:
        for part in pointer_tokens(fragment):
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise self.fail(ptr, f"$ref {ref!r} points at nothing; define it under $defs")
        return node, self.bases.get(id(node), doc_uri), self.pointers.get(id(node), ref)

    def follow(self, node: Any, base: str = "", limit: int = 50) -> tuple[Any, str, str | None]:
        """`node` with its `$ref`s followed until a node without one (the referring node's own
        keywords win over the target's, as the menu and the strict rewrite read them): (that
        merged node, its base URI, the first reference's name — its last pointer token or
        anchor — or None when `node` has no `$ref`)."""
        name = None
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str) and seen < limit:
            ref = node["$ref"]
            target, base, _ = self.resolve(ref, base)
            if name is None:
                name = "#" if ref == "#" else ref.rpartition("#")[2].rpartition("/")[2]
                name = _unescape(name)
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if isinstance(target, dict):
                node = {**target, **rest} if rest else target
            else:   # `true` adds nothing to the node's own keywords; `false` allows nothing
                node = (rest or True) if target is True else target
            seen += 1
        return node, base, name


_DEF_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def embed(schema: Any, defs: dict, where: str = "the schema") -> Any:
    """`schema`, a document of its own, rewritten to sit anywhere inside a host document whose
    root `$defs` is `defs`: every `$ref` it holds is resolved by the one rule (against
    `schema`'s own root, `$id`s and `$anchor`s) and pointed at a copy of its target added to
    `defs` (`#/$defs/Name`, a plain name from `[A-Za-z0-9_.-]`, the form every provider follows,
    recursion included). A definition keeps its own name unless `defs` already has it; an
    anchor keeps its anchor's name, `#` becomes `root`, any other target the last token of its
    pointer. `$id` and `$anchor` are left out (every reference that used them is written as a
    pointer into `defs`), and so are the `$defs` / `definitions` containers (what they hold that
    is referred to is in `defs`). Nothing else changes, so the copy accepts what `schema` does.
    `schema` itself is not changed."""
    return _Embedding(schema, defs, where).run()


class _Embedding:
    def __init__(self, schema: Any, defs: dict, where: str):
        self.doc = Document(schema, where)
        self.defs = defs
        self.names: dict[int, str] = {}   # id(target in `schema`) -> its name in `defs`
        self.pending: list[tuple[str, Any, str]] = []

    def run(self) -> Any:
        out = self.node(self.doc.root, "")
        while self.pending:   # (a copied target may refer on: those join the list)
            name, target, base = self.pending.pop()
            self.defs[name] = self.node(target, base)
        return out

    def name_for(self, ref: str, target: Any, base: str) -> str:
        name = self.names.get(id(target))
        if name is None:
            wanted = "root" if ref == "#" else _unescape(ref.rpartition("#")[2].rpartition("/")[2])
            stem = _DEF_NAME.sub("_", wanted) or "ref"
            name, n = stem, 2
            while name in self.defs:
                name, n = f"{stem}-{n}", n + 1
            self.defs[name] = True   # (reserved: the copy is written once the walk is done)
            self.names[id(target)] = name
            self.pending.append((name, target, base))
        return name

    def node(self, s: Any, base: str) -> Any:
        if not isinstance(s, dict):
            return s
        if isinstance(s.get("$id"), str):
            base = join_uri(base, s["$id"]).partition("#")[0]
        out: dict = {}
        for k, v in s.items():
            if k in ("$id", "$anchor", "$defs", "definitions"):
                continue
            if k == "$ref" and isinstance(v, str):
                target, tbase, _ = self.doc.resolve(v, base)
                out[k] = f"#/$defs/{self.name_for(v, target, tbase)}"
            elif k in SINGLE:   # (a list under `items`: draft 7's tuple form)
                out[k] = [self.node(x, base) for x in v] if isinstance(v, list) else \
                    self.node(v, base)
            elif k in LISTS and isinstance(v, list):
                out[k] = [self.node(x, base) for x in v]
            elif k in MAPS and isinstance(v, dict):
                out[k] = {n: self.node(x, base) for n, x in v.items()}
            else:
                out[k] = v
        return out
