"""The toy's own records stay the toy's: a graph counts its replays, a device its syncs, a clock its timeline.

A CUDA graph's replay count or a GPU's syncs are not numbers a program can set; on the toy they are Python
attributes, so without this module any code could write ``g.replays = 3`` or ``dev.sync_count = 1`` and make the
toy report work that never happened. Here such a write from outside toygraph raises ``AttributeError`` with the
reason, and so does replacing a method of a toy class (``ToyGraph.replay = ...``) or editing a timeline's events.

How a write is judged: walking out from the code that writes, frames of the standard library are passed through
(``setattr``, ``unittest.mock``, ``dataclasses`` and the ``<string>`` code it generates); the first other frame decides. If it is toygraph's own code, the
write goes ahead; otherwise it is refused. A refusal also raises the audit event ``toygraph.tamper``
(:func:`sys.audit`), which a grader's audit hook can record. New attributes a program adds to a toy object (a
subclass's own fields) are allowed: only what the toy itself keeps is guarded.

The toy's lists are ``Record`` (a list only toygraph changes); its dicts and sets are ``RecordDict`` and
``RecordSet``, which are not dicts or sets at all, so a dict's own methods (``dict.update(record, ...)``) do not
apply to them.

A simplification the real thing does not need: CUDA keeps these records on the device and in the driver, out of
the program's reach; the toy keeps them in Python objects and guards the doors it can see. Code that reaches
around the doors (``object.__setattr__``, an object's ``__dict__``, ``vars()``) is not stopped here; a grader's
static review flags those names.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import sysconfig

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# where the standard library's files are: sysconfig's idea of it, and where dataclasses.py came from (in the browser,
# Pyodide keeps the standard library in a zip file that sysconfig does not name)
_STDLIB = tuple({os.path.abspath(p) + os.sep for p in (sysconfig.get_paths().get("stdlib"),
                                                          sysconfig.get_paths().get("platstdlib"),
                                                          os.path.dirname(dataclasses.__file__)) if p})
_getframe = sys._getframe
_audit = sys.audit


def _from_toygraph(skip: int = 2) -> bool:
    """Whether the code doing the write (skip frames out from here, then through the standard library) is toygraph's."""
    frame = _getframe(skip)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_HERE):
            return True
        if name.startswith(("<frozen ", "<string>")) or (name.startswith(_STDLIB) and "site-packages" not in name):
            frame = frame.f_back
            continue
        return False
    return False  # no toygraph frame at all: a thread whose target is a built-in (setattr) is not the toy


def _refuse(what: str, why: str) -> None:
    _audit("toygraph.tamper", what)
    raise AttributeError(f"{what}: {why} Only toygraph changes it (a graph counts its own replays, a device its "
                         "own syncs, a clock its own timeline); read it, don't write it.")


class SealedType(type):
    """The metaclass of the toy's classes: their methods and properties cannot be replaced from outside toygraph."""

    def __setattr__(cls, name, value):
        if not _from_toygraph():
            _refuse(f"{cls.__name__}.{name}", "this is a method or property of the toy itself.")
        type.__setattr__(cls, name, value)

    def __delattr__(cls, name):
        if not _from_toygraph():
            _refuse(f"{cls.__name__}.{name}", "this is a method or property of the toy itself.")
        type.__delattr__(cls, name)


class Guarded(metaclass=SealedType):
    """A toy object whose attributes (those the toy set, and those of its class) only toygraph writes."""

    __slots__ = ()

    def __setattr__(self, name, value):
        if not _from_toygraph() and _owned(self, name):
            _refuse(f"{type(self).__name__}.{name}", "this is the toy's own record.")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if not _from_toygraph() and _owned(self, name):
            _refuse(f"{type(self).__name__}.{name}", "this is the toy's own record.")
        object.__delattr__(self, name)


def _owned(obj, name: str) -> bool:
    """name is something the toy keeps: set by toygraph on the object, or defined by one of toygraph's classes."""
    own = getattr(obj, "__dict__", None)
    if isinstance(own, dict) and name in own:
        return True
    for klass in type(obj).__mro__:
        if name in vars(klass) and getattr(klass, "__module__", "").startswith("toygraph"):
            return True
    return False


class Record(list, metaclass=SealedType):
    """A list only toygraph changes (a timeline's events, a graph's nodes, a device's graph pools): reading,
    iterating and copying work as for a list."""

    __slots__ = ()

    def _guard(self, how: str) -> None:
        if not _from_toygraph(3):
            _refuse(f"a list the toy keeps ({how})", "this is the toy's own record (a timeline's events, a graph's "
                    "nodes, a device's graph pools).")

    def append(self, item):
        self._guard("append")
        list.append(self, item)

    def extend(self, items):
        self._guard("extend")
        list.extend(self, items)

    def insert(self, index, item):
        self._guard("insert")
        list.insert(self, index, item)

    def pop(self, index=-1):
        self._guard("pop")
        return list.pop(self, index)

    def remove(self, item):
        self._guard("remove")
        list.remove(self, item)

    def clear(self):
        self._guard("clear")
        list.clear(self)

    def sort(self, *args, **kwargs):
        self._guard("sort")
        list.sort(self, *args, **kwargs)

    def reverse(self):
        self._guard("reverse")
        list.reverse(self)

    def __setitem__(self, index, value):
        self._guard("item assignment")
        list.__setitem__(self, index, value)

    def __delitem__(self, index):
        self._guard("item deletion")
        list.__delitem__(self, index)

    def __iadd__(self, items):
        self._guard("+=")
        return list.__iadd__(self, items)

    def __imul__(self, n):
        self._guard("*=")
        return list.__imul__(self, n)

    def __reduce_ex__(self, protocol):  # a copy or a pickle is a plain list: the guard guards the toy's own
        return (list, (list(self),))


def _toy_only(what: str) -> None:
    if not _from_toygraph(3):
        _refuse(f"a {what} the toy keeps", "this is the toy's own record (a graph's dependencies and streams, a "
                "runner's graphs, a generator's registrations).")


class _Held(metaclass=SealedType):
    """What RecordDict and RecordSet share: a plain dict or set (_kind) held inside, that only toygraph changes;
    reading, iterating and copying work as for the plain one, and a copy or a pickle is a plain one."""

    __slots__ = ("_held",)
    _kind: type = dict

    def __init__(self, items=()) -> None:
        object.__setattr__(self, "_held", self._kind(items))

    def __setattr__(self, name, value):
        _refuse(f"{type(self).__name__}.{name}", "this is the toy's own record.")

    def __contains__(self, item) -> bool:
        return item in self._held

    def __iter__(self):
        return iter(self._held.copy())

    def __len__(self) -> int:
        return len(self._held)

    def __repr__(self) -> str:
        return repr(self._held)

    def __reduce_ex__(self, protocol):  # a copy or a pickle is a plain one: the guard guards the toy's own
        return (self._kind, (self._held.copy(),))

    def clear(self) -> None:
        _toy_only(self._kind.__name__)
        self._held.clear()


class RecordDict(_Held):
    """A mapping only toygraph changes (a stream graph's dependencies, a bucketed runner's graphs). It is not a
    dict: dict's own methods (dict.update(record, ...), reached by any name) do not apply to it, so its entries
    are out of reach."""

    __slots__ = ()
    _kind = dict

    def __getitem__(self, key):
        return self._held[key]

    def get(self, key, default=None):
        return self._held.get(key, default)

    def keys(self):
        return self._held.copy().keys()

    def values(self):
        return self._held.copy().values()

    def items(self):
        return self._held.copy().items()

    def copy(self) -> dict:
        return self._held.copy()

    def __eq__(self, other) -> bool:  # with copies only: other's __eq__ never sees the entries themselves
        if isinstance(other, RecordDict):
            return self._held.copy() == other._held.copy()
        return self._held.copy() == other if isinstance(other, dict) else NotImplemented

    __hash__ = None

    def __or__(self, other) -> dict:
        return {**self._held, **other}

    def __setitem__(self, key, value) -> None:
        _toy_only("dict")
        self._held[key] = value

    def __delitem__(self, key) -> None:
        _toy_only("dict")
        del self._held[key]

    def pop(self, key, *default):
        _toy_only("dict")
        return self._held.pop(key, *default)

    def setdefault(self, key, default=None):
        _toy_only("dict")
        return self._held.setdefault(key, default)

    def update(self, *args, **kwargs) -> None:
        _toy_only("dict")
        self._held.update(*args, **kwargs)


class RecordSet(_Held):
    """A set only toygraph changes (the graphs a generator is registered with). Not a set: set's own methods do not
    apply to it."""

    __slots__ = ()
    _kind = set

    def add(self, item) -> None:
        _toy_only("set")
        self._held.add(item)

    def discard(self, item) -> None:
        _toy_only("set")
        self._held.discard(item)
