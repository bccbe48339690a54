"""Capture bakes the Python values a kernel reads; the contents of device buffers stay live.

A CUDA graph records each kernel with its arguments *as they were at capture*: a Python
number passed to an op (``x * scale``) is written into the kernel's parameters, so
rebinding ``scale`` afterwards changes nothing a replay computes. Only memory is read
afresh on every replay, which is why new data reaches a graph by being copied into its
static input.

The toy does the same to the Python function it records. When a kernel is captured,
:func:`freeze` makes a copy of it whose Python values are snapshots taken then:

* its **closure variables** (names from an enclosing function or notebook cell),
* the **global names its code reads** (looked up in its module's namespace),
* its **default arguments** (``lambda x, s=scale: ...``),
* the **object of a bound method** or a callable object, and the arguments of a
  ``functools.partial``,
* and, one level down and on, the same for helper functions defined in the same module
  (or notebook) that the kernel calls. Containers (lists, dicts, sets, tuples) and other
  objects are deep-copied.

Every launch freezes its kernel, eager ones too: a kernel reads host values as they are at
its launch and can write nothing but its output (appending to a host list from inside a kernel
appends to a copy), so device values reach the host only through a read, which is a sync.

What stays **live** (read at replay, as on a GPU): toy device buffers (and the devices,
pools and graphs they belong to), whose contents are the device memory a kernel reads.

Where the toy simplifies, said plainly: modules, classes and functions from other modules
are code, not values, and are used as they are (``math.pi`` is read at replay, class
attributes too); an object that cannot be copied (a file, a lock, a generator) is left live
and named in :attr:`Frozen.live`. A real GPU never runs your Python at all: it runs the
compiled kernel with the arguments captured, so on a GPU nothing of the host is read again.
"""

from __future__ import annotations

import builtins
import copy
import dis
import functools
import types
from dataclasses import dataclass, field
from typing import Any, Callable

from .memory import Buffer, _DeviceObject, _freezing

_CODE_LIKE = (types.ModuleType, type, types.BuiltinFunctionType, types.BuiltinMethodType, types.CodeType,
              types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType)
_SCALARS = (type(None), bool, int, float, complex, str, bytes, range, type(Ellipsis), type(NotImplemented))


@dataclass
class Frozen:
    """A kernel frozen at capture: the function replay runs, and what it baked."""

    fn: Callable[..., Any]
    values: dict[str, Any] = field(default_factory=dict)
    """Each Python value the kernel reads, by name, as baked at capture (``{"scale": 2}``)."""
    buffers: dict[str, Any] = field(default_factory=dict)
    """Each device buffer the kernel reads by name: kept live, its contents read at every replay."""
    live: tuple[str, ...] = ()
    """Names of values that could not be copied and stay live (a simplification; see the module's docstring)."""


@functools.lru_cache(maxsize=4096)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """Names the code (and code nested in it, e.g. a list comprehension) loads as globals, in order."""
    names: list[str] = []
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str) and ins.argval not in names:
            names.append(ins.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += [n for n in _global_names(const) if n not in names]
    return tuple(names)


class _Freezer:
    def __init__(self, home: dict[str, Any] | None) -> None:
        self.memo: dict[int, Any] = {}
        self.copy_memo: dict[int, Any] = {}
        self.home = home  # the kernel's module namespace: helpers defined there are frozen too
        self.live: list[str] = []

    def value(self, v: Any, name: str) -> Any:
        if id(v) in self.memo:
            return self.memo[id(v)]
        if isinstance(v, (_DeviceObject, *_SCALARS, *_CODE_LIKE)):
            return v
        if isinstance(v, types.FunctionType):
            return self.function(v)
        if isinstance(v, types.MethodType):
            return types.MethodType(self.value(v.__func__, name), self.value(v.__self__, name))
        if isinstance(v, functools.partial):
            return functools.partial(self.value(v.func, name), *(self.value(a, name) for a in v.args),
                                     **{k: self.value(a, name) for k, a in v.keywords.items()})
        if type(v) is list:
            out: list = []
            self.memo[id(v)] = out
            out.extend(self.value(item, name) for item in v)
            return out
        if type(v) is dict:
            table: dict = {}
            self.memo[id(v)] = table
            table.update((k, self.value(item, name)) for k, item in v.items())
            return table
        if type(v) in (tuple, set, frozenset):
            frozen = type(v)(self.value(item, name) for item in v)
            self.memo[id(v)] = frozen
            return frozen
        try:
            with _freezing():
                frozen = copy.deepcopy(v, self.copy_memo)
        except Exception:  # a file, a lock, a generator...: it cannot be copied, so it stays live
            self.live.append(name)
            return v
        self.memo[id(v)] = frozen
        return frozen

    def function(self, f: types.FunctionType) -> types.FunctionType:
        if self.home is not None and f.__globals__ is not self.home:
            return f  # a library's function is code, not a value of the kernel: used as it is
        cells = tuple(types.CellType() for _ in f.__closure__ or ())
        namespace: dict[str, Any] = {"__builtins__": f.__globals__.get("__builtins__", builtins),
                                     "__name__": f.__globals__.get("__name__")}
        new = types.FunctionType(f.__code__, namespace, f.__name__, None, cells or None)
        self.memo[id(f)] = new
        for var, source, target in zip(f.__code__.co_freevars, f.__closure__ or (), cells):
            try:
                contents = source.cell_contents
            except ValueError:  # not bound yet
                continue
            target.cell_contents = self.value(contents, var)
        for var in _global_names(f.__code__):
            if var in f.__globals__:
                namespace[var] = self.value(f.__globals__[var], var)
        if f.__defaults__:
            new.__defaults__ = tuple(self.value(d, "default argument") for d in f.__defaults__)
        if f.__kwdefaults__:
            new.__kwdefaults__ = {k: self.value(d, k) for k, d in f.__kwdefaults__.items()}
        new.__qualname__, new.__module__, new.__doc__ = f.__qualname__, f.__module__, f.__doc__
        new.__dict__.update(f.__dict__)
        return new


def _is_value(v: Any) -> bool:
    return not isinstance(v, (*_CODE_LIKE, types.FunctionType, functools.partial))


def freeze(fn: Callable[..., Any]) -> Frozen:
    """A copy of the kernel `fn` whose Python values are fixed now, as capture fixes a kernel's arguments."""
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    home = target.func if isinstance(target, functools.partial) else target
    freezer = _Freezer(home.__globals__ if isinstance(home, types.FunctionType) else None)
    frozen_fn = freezer.value(fn, getattr(fn, "__name__", "the kernel"))
    seen: dict[str, Any] = {}
    if isinstance(target, types.FunctionType):
        new = frozen_fn.__func__ if isinstance(frozen_fn, types.MethodType) else frozen_fn
        for var, cell in zip(target.__code__.co_freevars, new.__closure__ or ()):
            try:
                seen[var] = cell.cell_contents
            except ValueError:
                pass
        for var in _global_names(target.__code__):
            if var in new.__globals__ and var not in ("__builtins__", "__name__"):
                seen[var] = new.__globals__[var]
        names = target.__code__.co_varnames[:target.__code__.co_argcount]
        for var, d in zip(names[len(names) - len(new.__defaults__ or ()):], new.__defaults__ or ()):
            seen[var] = d
        seen.update(new.__kwdefaults__ or {})
        if isinstance(frozen_fn, types.MethodType):
            seen["self"] = frozen_fn.__self__
    elif not isinstance(fn, functools.partial):
        seen["the kernel object"] = frozen_fn
    buffers = {k: v for k, v in seen.items() if isinstance(v, Buffer)}
    values = {k: v for k, v in seen.items() if not isinstance(v, _DeviceObject) and _is_value(v)}
    return Frozen(frozen_fn, values, buffers, tuple(dict.fromkeys(freezer.live)))
