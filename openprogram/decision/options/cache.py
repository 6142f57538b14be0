"""The option cache: an option built once per function (and per value or schema entry).

Re-running a notebook cell hands `make` a fresh dict of the same functions, and reading their
signatures, type hints and docstrings again was most of a decision's own time; this module keeps
the option built from each entry, with what it was built from, and serves it while that is
unchanged (the comment below says how that is checked), and keeps the Menu of an option set made
only of cached options, so its text is rendered once. A list of plain data (tool definitions as
dicts, as a benchmark or a server hands them over) is kept whole, by its exact content
(`_cached_list`).
"""
from __future__ import annotations

import marshal
import re
import types
import warnings
from _thread import allocate_lock as Lock  # threading.Lock itself, without importing threading
from collections import OrderedDict

from ...base.errors import OptionWarning
from ..schema.fields import MISSING, user_stacklevel
from .entries import build_option
from .kinds import FunctionOption, Option, SchemaOption, ValueOption, _kind_listeners
from .menu import Menu

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

# Re-running a notebook cell hands `make` a fresh dict of the same functions, and reading their
# signatures, type hints and docstrings again was most of a decision's own time. So the option
# built from a plain function is kept, with a fingerprint of everything it was built from: the
# code, name, docstring, defaults, annotations (and the globals a string annotation names),
# `input_meta`, `__signature__` and `__wrapped__`. A hit is served only when the very same
# function object (checked with `is`, never by id) has the same fingerprint; a changed or
# redefined function is rebuilt and replaces its entry. Entries are keyed by the option's name
# and the function's qualified name, so a redefinition releases the old function; the cache is
# a bounded LRU. Other callables (classes, methods, partials) are rebuilt every time: what their
# option depends on cannot be checked this cheaply. Value and schema entries of the dict form are
# kept too (a value while it is the very same object, a schema while it equals the one it was
# built from), so an option set made of functions, values and schemas that is handed to `make`
# again gets back the same Menu, and its menu text is rendered once.

#: How many options the normalize cache keeps (least recently used go first), and how many
#: option sets made only of those (with their menu text).
OPTION_CACHE_SIZE = 2048


MENU_CACHE_SIZE = 32


_cache: OrderedDict[tuple, tuple[tuple, Option, tuple]] = OrderedDict()


_menus: OrderedDict[tuple, Menu] = OrderedDict()


#: How many plain lists (tool definitions as dicts, names, ...) are kept with their Menu.
LIST_CACHE_SIZE = 8


# A plain list is kept by its content: digest -> (the list last given with it, its bytes as
# marshal's version 4 writes them, its content as version 2 writes it, its Menu); and id(that
# list) -> digest, so the list given again is found without hashing. See `_cached_list`.
_lists: OrderedDict[bytes, tuple[Any, bytes, bytes, Menu]] = OrderedDict()
_list_ids: dict[int, bytes] = {}


_cache_lock = Lock()


_NAME = re.compile(r"[A-Za-z_]\w*")


def clear_option_cache() -> None:
    """Forget every cached option (function, value and schema entries) and option set; each is
    rebuilt on next use."""
    with _cache_lock:
        _cache.clear()
        _menus.clear()
        _lists.clear()
        _list_ids.clear()


def _cached_option(name: str | None, handler: Any, position: int | None) -> Option:
    """The option of one entry of an option set (`name` None: the list form, at `position`),
    from the cache when its function is unchanged."""
    fn, description = None, None
    if type(handler) is types.FunctionType:
        fn = handler
    elif type(handler) is tuple and len(handler) == 2 and \
            type(handler[0]) is types.FunctionType and type(handler[1]) is str:
        fn, description = handler
    if fn is None:
        plain = _plain_key(name, handler) if name is not None else None
        if plain is None:
            return build_option(name, handler, position)
        return _cached_plain(name, handler, *plain)
    key = (name, description, fn.__module__, fn.__qualname__)
    entry = _cache.get(key)
    try:
        if entry is not None:
            snapshot, option, names = entry
            # _state() holds the live objects and the entry copies of them, so this compares,
            # in C, the function as it is now with the function as it was.
            if option.handler is fn and snapshot == _state(fn, names):
                return _served(key, option)
        names = tuple(n for a in fn.__annotations__.values() if type(a) is str
                      for n in _NAME.findall(a))
        snapshot = _copied(_state(fn, names))
    except Exception:  # a value that cannot be compared or copied: build, do not cache
        return build_option(name, handler, position)
    option = build_option(name, handler, position)
    if type(option) is FunctionOption and option.handler is fn:
        _keep(key, (snapshot, option, names))
    return option


def _served(key: tuple, option: Option) -> Option:
    """A cache hit: the entry becomes the most recently used."""
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
    return option


def _keep(key: tuple, entry: tuple) -> None:
    """Cache an entry (snapshot, option, names), dropping the least recently used beyond the
    bound."""
    entry[1]._cached = True
    with _cache_lock:
        _cache[key] = entry
        _cache.move_to_end(key)
        while len(_cache) > OPTION_CACHE_SIZE:
            _cache.popitem(last=False)


def _plain_key(name: str, handler: Any) -> tuple | None:
    """For a value or schema entry of the dict form: its cache key, and the object a hit must
    match. A value must be the very same object (the pick returns it); a schema, equal to a copy
    of the one the option was built from (only its content is read). None for anything else."""
    if type(handler) is tuple:
        if len(handler) != 2:
            return None
        a, b = handler
        if type(a) is str and type(b) is dict:
            return ("schema", name, a), b
        if type(b) is str and not callable(a):
            return ("value", name, b), a
        return None
    if callable(handler):
        return None
    return ("value", name, None), handler


def _cached_plain(name: str, handler: Any, key: tuple, match: Any) -> Option:
    entry = _cache.get(key)
    if entry is not None:
        snapshot, option, _ = entry
        try:
            hit = option.value is match if key[0] == "value" else snapshot == match
        except Exception:  # a schema that cannot be compared: rebuilt each time
            hit = False
        if hit:
            return _served(key, option)
    option = build_option(name, handler, None)
    if type(option) is (ValueOption if key[0] == "value" else SchemaOption):
        try:
            import copy
            snapshot = None if key[0] == "value" else copy.deepcopy(match)
        except Exception:  # a schema that cannot be copied: not cached
            return option
        _keep(key, (snapshot, option, ()))
    return option


def _cached_menu(names: tuple[str, ...], options: tuple[Option, ...]) -> Menu:
    """The Menu of these very option objects, made (and its text rendered) once: a fresh dict of
    the same functions gives the same cached options, hence the same Menu."""
    menu = _menus.get(names)
    if menu is not None and menu == options:  # tuple equality: the same objects
        return menu
    menu = Menu(options)
    if all(o.__dict__.get("_cached") for o in options):
        with _cache_lock:
            _menus[names] = menu
            _menus.move_to_end(names)
            while len(_menus) > MENU_CACHE_SIZE:
                _menus.popitem(last=False)
    return menu


def _state(fn: types.FunctionType, names: tuple[str, ...] = ()) -> tuple:
    """Everything a function option is built from, as live objects. `names` are the globals its
    string annotations name (`x: "Order"` is read through the globals: a redefined Order
    counts)."""
    extra = fn.__dict__
    wrapped = extra.get("__wrapped__")
    return (fn.__code__, fn.__name__, fn.__doc__, fn.__defaults__, fn.__kwdefaults__,
            fn.__annotations__, extra.get("input_meta"), extra.get("__signature__"),
            _state(wrapped) if type(wrapped) is types.FunctionType else wrapped,
            names and tuple([_hint_globals(fn).get(n, MISSING) for n in names]))


def _hint_globals(fn: types.FunctionType) -> dict:
    """The globals typing.get_type_hints reads a function's string annotations in: those of
    the function a decorator wrapped."""
    while type(fn.__dict__.get("__wrapped__")) is types.FunctionType:
        fn = fn.__dict__["__wrapped__"]
    return fn.__globals__


def _copied(value: Any) -> Any:
    """`value` with its dicts, lists, tuples and sets copied all the way down (the values in
    them kept as they are), so a later change made in place compares unequal."""
    t = type(value)
    if t is dict:
        return {k: _copied(v) if type(v) in _NESTED else v for k, v in value.items()}
    if t is list or t is tuple:
        return t(_copied(v) if type(v) in _NESTED else v for v in value)
    if t is set:
        return set(value)
    return value


_NESTED = frozenset({dict, list, tuple, set})


_kind_listeners.append(clear_option_cache)


def _cached_list(options: list | tuple, build: Callable[[Any], Menu]) -> Menu | None:
    """The Menu of a list (or tuple) made only of plain data — tool definitions as dicts, names,
    `(name, description)` pairs — built once per content: the same 1,841 tool dicts handed to
    `make` again were read again every time (1.9 s a decision). None for a list holding
    anything else (a function, an SDK object, a `tool(...)`), which the per-entry caches serve.

    A list is compared as `marshal` writes it: exact builtin types only (a subclass is not
    plain data), `1`, `1.0` and `True` told apart, keys in their order, so equal bytes are the
    same content and a hit is sound whatever was changed in place since; written in C. The
    list given again is found by its id (its entry holds it, so the id is not reused) and
    compared as version 4 writes it (2.4 ms for 1.4 MB, but the bytes also say which strings
    and dicts are shared); failing that, a list is found by the digest of its content as
    version 2 writes it (the content alone: a fresh `json.load` of the same file finds it).
    The Menu is built (`build`) from a private copy (`marshal.loads`) of each entry that can be
    changed in place, so no later change to the caller's dicts reaches it."""
    try:
        data = marshal.dumps(options, 4)
    except ValueError:   # not plain data (or nested past marshal's depth)
        return None
    digest = _list_ids.get(id(options))
    entry = _lists.get(digest) if digest is not None else None
    built = False
    if entry is None or entry[0] is not options or entry[1] != data:
        import hashlib
        content = marshal.dumps(options, 2)
        digest = hashlib.blake2b(content, digest_size=20).digest()
        entry = _lists.get(digest)
        if entry is None or entry[2] != content:
            copy = marshal.loads(content)   # (text is kept as given: a name resolves to it)
            entry = (options, data, content, build([x if _immutable(x) else y
                                                    for x, y in zip(options, copy)]))
            built = True
    if not built:
        _warn_again(entry[3])
    with _cache_lock:
        old = _lists.get(digest)
        if old is not None and old[0] is not options and _list_ids.get(id(old[0])) == digest:
            del _list_ids[id(old[0])]
        _lists[digest] = (options, data, entry[2], entry[3])
        _lists.move_to_end(digest)
        _list_ids[id(options)] = digest
        while len(_lists) > LIST_CACHE_SIZE:
            gone_digest, (gone, *_) = _lists.popitem(last=False)
            if _list_ids.get(id(gone)) == gone_digest:
                del _list_ids[id(gone)]
    return entry[3]


def _warn_again(menu: Menu) -> None:
    """The warnings its options gave when the menu was built, given again: a list served from
    the cache warns as the same list read afresh would (under `pytest.warns` or a
    `catch_warnings` block too)."""
    for message in menu.warnings:   # (gathered once: a hit on 1,841 tools walks none of them)
        warnings.warn(message, OptionWarning, stacklevel=user_stacklevel())


def _immutable(item: Any) -> bool:
    """An entry of a plain list nothing can change in place: a name, a tuple of texts."""
    t = type(item)
    return t is str or (t is tuple and all(type(x) is str for x in item))
