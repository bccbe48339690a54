"""What a check cell calls: record observations of the learner's code as plain data.

A check cell never decides whether an answer is right. It calls the learner's code and records what it saw::

    from graphcourse.grading.observe import observe, inputs

    observe.call("bucket for 17", pick_bucket, 17, [1, 2, 4, 8, 16, 32], hint="the smallest bucket that holds it")
    observe("syncs", dev.sync_count)
    for n in inputs.sample(range(1, 40), 5):  # hidden inputs: the assignment's fixed seed, one stream per check
        observe.call(f"bucket for {n}", pick_bucket, n, inputs.shuffled([1, 2, 4, 8, 16, 32]))

The grader (``graphcourse.grading``) runs the same cell with the model answer and compares the two sets of
observations outside every kernel. In a learner's own notebook ``observe`` only records (see ``recorded()``) and
prints one line, so the cell runs anywhere. Standard library only: this module is imported by every kernel.

Plain data means exact built-in types: ``bool, int, float, str, None``, lists and tuples of them (recorded as
lists) and dicts with ``str`` keys. Anything else is recorded as ``{"unplain": "TypeName"}``, which equals nothing
the model records: a learner object with its own ``__eq__`` never passes for a value.
"""

from __future__ import annotations

import builtins as _builtins_module
import hashlib as _hashlib
import hmac as _hmac
import json as _json
import random as _random
import sys as _sys
import threading as _threading
import warnings as _warnings

from . import tripwire as _tripwire

# Bound once, when the grader's preamble imports this module before any learner code runs.
_type, _len, _isinstance, _str, _list, _dict, _sorted = type, len, isinstance, str, list, dict, sorted
_int, _float, _bool, _NoneType, _tuple, _slice = int, float, bool, type(None), tuple, slice
_id, _repr, _getattr, _vars, _all = id, repr, getattr, vars, all
_dumps = _json.dumps
_hmac_new, _sha256 = _hmac.new, _hashlib.sha256

MIME = "application/vnd.graphcourse.observations.v1+json"
MAX_DEPTH = 20
MAX_ITEMS = 10_000
MAX_STR = 10_000
SELF_CHECK_SEED = 0


class _TooLarge(Exception):
    pass


def plain(value, _depth=0, _budget=None):
    """value as plain JSON data of exact built-in types, or {"unplain": type name} (never raises)."""
    budget = _budget if _budget is not None else [MAX_ITEMS]
    try:
        return _plain(value, _depth, budget)
    except _TooLarge:
        return {"unplain": "too large (more than 10 000 items, deeper than 20, or a string over 10 000 characters)"}
    except RecursionError:
        return {"unplain": "too deep"}


def _plain(value, depth, budget):
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise _TooLarge
    t = _type(value)
    if t is _bool or t is _int or t is _NoneType:
        return value
    if t is _float:
        if value != value:
            return {"float": "nan"}
        if value in (_float("inf"), -_float("inf")):
            return {"float": "inf" if value > 0 else "-inf"}
        return value
    if t is _str:
        if _len(value) > MAX_STR:
            raise _TooLarge
        return value
    if t is _list or t is _tuple:
        return [_plain(v, depth + 1, budget) for v in value]
    if t is _dict:
        out = {}
        for k, v in _dict.items(value):
            if _type(k) is not _str:
                return {"unplain": "dict with a key that is not a str"}
            out[k] = _plain(v, depth + 1, budget)
        return out
    return {"unplain": _getattr(t, "__qualname__", "object") if _type(_getattr(t, "__qualname__", None)) is _str else "object"}


_BUILTIN_EXCEPTIONS = {_id(v): k for k, v in _vars(_builtins_module).items()
                       if _isinstance(v, type) and issubclass(v, BaseException)}


def _exception_name(exc: BaseException) -> str:
    """The nearest built-in (or toygraph) exception class of exc: a learner's own class named ValueError is not one."""
    for cls in _type(exc).__mro__:
        name = _BUILTIN_EXCEPTIONS.get(_id(cls))
        if name is not None:
            return name
        module = _sys.modules.get(_getattr(cls, "__module__", None) or "")
        mod_name = _getattr(module, "__name__", "")
        if _type(mod_name) is _str and (mod_name == "toygraph" or mod_name.startswith("toygraph.")):
            for attr, val in _vars(module).items():
                if val is cls:
                    return f"toygraph.{attr}"
    return "BaseException"


MAX_SAID = 500  # characters of an exception's message shown beside "raised X"
_ARGS = BaseException.__dict__["args"]  # the args slot itself: reading it runs no code of the exception's class
_BASE_STR = BaseException.__str__
_ModuleType = _type(_sys)


def _course_class(cls) -> bool:
    """Whether cls is a class toygraph's own modules define (found by identity, reading nothing of cls)."""
    for name, module in _list(_sys.modules.items()):
        if _type(name) is not _str or not (name == "toygraph" or name.startswith("toygraph.")) \
                or _type(module) is not _ModuleType:
            continue
        for val in _dict.values(_vars(module)):
            if val is cls:
                return True
    return False


def exception_message(exc: BaseException) -> str | None:
    """The message of a built-in or toygraph exception, read from its args without calling any of its methods; None
    for any other class (an answer's own exception class, or one with its own __str__, could run code when shown).

    Only str args count (a KeyError's key could be an object of the answer's), cut to MAX_SAID characters. Display
    only: a record's compared value is its "raised" name alone."""
    cls = _type(exc)
    if _id(cls) not in _BUILTIN_EXCEPTIONS:
        if not _course_class(cls) or _vars(cls).get("__str__", _BASE_STR) is not _BASE_STR \
                or _getattr(cls, "__str__", None) is not _BASE_STR:
            return None
    args = _ARGS.__get__(exc, BaseException)
    if _type(args) is not _tuple:
        return None
    parts = [a for a in args if _type(a) is _str and a]
    if not parts:
        return None
    text = "; ".join(parts)
    return text if _len(text) <= MAX_SAID else text[: MAX_SAID - 3] + "..."


class _Guarded(metaclass=_tripwire.SealedType):
    """While grading (the tripwire installed), only the grader's own code sets these objects' attributes."""

    def __setattr__(self, name, value):
        if _tripwire.installed() and _tripwire.culprit(_sys._getframe(1), strict=True) is not None:
            _tripwire.refuse(f"graphcourse.grading.observe: {_type(self).__name__}.{name} set")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if _tripwire.installed() and _tripwire.culprit(_sys._getframe(1), strict=True) is not None:
            _tripwire.refuse(f"graphcourse.grading.observe: {_type(self).__name__}.{name} deleted")
        object.__delattr__(self, name)


class _State(_Guarded):
    def __init__(self) -> None:
        self.check: str | None = None  # set by the grader's header; None in a learner's notebook
        self.obs: dict[str, dict] = {}
        self.hints: dict[str, str] = {}
        self.said: dict[str, str] = {}  # key -> the message of the exception it raised (display only, never compared)
        self.recorded: dict[str, dict] = {}
        self.recorded_said: dict[str, dict] = {}  # outside grading: {label: {key: message}}, beside `recorded`
        self.label = "notebook"
        self.baseline: dict | None = None
        self.names: tuple = ()
        self.poisoned = False
        self.given: tuple = ()  # (name, value, kind, state) of the names the checks read but do not bind (_given)
        self.given_checked = False
        self.given_flags: tuple = ()
        self.restored: tuple = ()  # what _begin put back for this check
        self.space: dict | None = None  # the namespace the check cells run in (set by _begin)


_state = _State()


class _Rng(_random.Random, metaclass=_tripwire.SealedType):
    """random.Random with its methods copied when this module is imported (before any answer runs), so that patching
    random.Random later changes nothing here; while grading only the grader's code re-seeds it."""

    def seed(self, *args, **kwargs):
        if _tripwire.installed() and _tripwire.culprit(_sys._getframe(1), strict=True) is not None:
            _tripwire.refuse("the hidden inputs' generator re-seeded")
        return _random.Random.seed(self, *args, **kwargs)

    def setstate(self, state):
        if _tripwire.installed() and _tripwire.culprit(_sys._getframe(1), strict=True) is not None:
            _tripwire.refuse("the hidden inputs' generator's state set")
        return _random.Random.setstate(self, state)


for _name in ("random", "getrandbits", "randint", "randrange", "_randbelow", "_randbelow_with_getrandbits",
              "choice", "sample", "shuffle", "uniform", "getstate"):
    if _name in _vars(_random.Random) or hasattr(_random.Random, _name):
        type.__setattr__(_Rng, _name, _getattr(_random.Random, _name))
del _name


class _Inputs(_Guarded):
    """Inputs for a check: a seeded random.Random, re-seeded by the grader for every check (same seed for the model)."""

    def __init__(self) -> None:
        self.rng = _Rng(SELF_CHECK_SEED)
        self.hidden = False

    def _seed(self, seed: int, check: str, hidden: bool) -> None:
        self.rng = _Rng(f"{seed}:{check}")
        self.hidden = hidden

    def randint(self, a: int, b: int) -> int:
        return self.rng.randint(a, b)

    def uniform(self, a: float, b: float) -> float:
        return self.rng.uniform(a, b)

    def choice(self, seq):
        return self.rng.choice(_list(seq))

    def sample(self, seq, k: int) -> list:
        return self.rng.sample(_list(seq), k)

    def shuffled(self, seq) -> list:
        out = _list(seq)
        self.rng.shuffle(out)
        return out


inputs = _Inputs()


class _Observe(_Guarded):
    """observe(key, value, hint=, tol=) records a value; observe.call(key, fn, *args, **kw) records what fn did."""

    def __call__(self, key, value, *, hint=None, tol=None):
        if _type(key) is not _str:
            raise TypeError(f"observe: the key must be a str, not {_type(key).__name__}")
        record = {"value": plain(value)}
        self._put(key, record, hint, tol)
        return value

    def call(self, key, fn, *args, hint=None, tol=None, **kwargs):
        if _type(key) is not _str:
            raise TypeError(f"observe.call: the key must be a str, not {_type(key).__name__}")
        space = _sys._getframe(1).f_globals if _state.check is not None and _tripwire.installed() else None
        before = _bindings(space) if space is not None else None
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # an exception is a behaviour to compare; SystemExit and the like end the cell
            _check_bindings(space, before)
            raised = _exception_name(exc)
            self._put(key, {"raised": raised}, hint, tol, said=exception_message(exc))
            if raised == "NotImplementedError":
                _say_not_answered()
            return None
        _check_bindings(space, before)
        self._put(key, {"value": plain(result)}, hint, tol)
        return result

    def _put(self, key, record, hint, tol, said=None):
        if _state.check is not None and _tripwire.installed() and not _from_check_code():
            _tripwire.refuse("observations recorded by the answer's own code")
        if _state.poisoned:
            record = {"value": {"unplain": "the answer changed the check's own variables while the check ran"}}
            said = None
        elif _state.check is not None and _state.space is not None and _rebound(_state.space):
            # a name the check reads (len, SharedPool) is not what its header put back: something the answer armed (a
            # thread, a finalizer) rebound it since, and what the check computed with it is not the check's
            record = {"value": {"unplain": "a name the check reads was rebound while the check ran"}}
            said = None
        if tol is not None:
            record["tol"] = _float(tol)
        _state.obs[key] = record
        if hint is not None:
            _state.hints[key] = _str(hint)
        if _state.check is not None and _tripwire.installed():  # the grader's copy leaves the kernel now
            _tripwire.observed(_state.check, key, record, None if hint is None else _str(hint), said=said)
        if _state.check is None:  # a learner's notebook: keep them for a self-check
            _state.recorded.setdefault(_state.label, {})[key] = record
            messages = _state.recorded_said.setdefault(_state.label, {})
            if said is None:
                messages.pop(key, None)
            else:
                messages[key] = said

    @staticmethod
    def recorded() -> dict:
        """{label: {key: record}} of everything observed outside grading (label: see `label`, default "notebook")."""
        return _state.recorded

    @staticmethod
    def said(label: str) -> dict:
        """{key: message} of the exceptions observed under label outside grading (display only: see exception_message)."""
        return _dict(_state.recorded_said.get(label, {}))

    @staticmethod
    def label(name: str) -> None:
        """Outside grading, file the next observations under name (a self-check sets the check id here)."""
        _state.label = _str(name)

    @staticmethod
    def hints() -> dict:
        return _dict(_state.hints)


observe = _Observe()
_tripwire.register_recorder(_Observe._put.__code__)


_MISSING = object()
_get_ident = _threading.get_ident
_MAIN_THREAD = _get_ident()  # this module is imported by the grader's preamble, on the main thread


def _bindings(space) -> dict:
    """What the check's own names (see _begin) are bound to, and, for dicts (a check's table of runs), what they hold
    (one level). Lists are not looked into: an answer that pads the batch it was given in place is sloppy, not
    tampering, and its observations say whether it is right."""
    out = {}
    for name in _state.names:
        value = space.get(name, _MISSING)
        if _type(value) is _dict:
            out[name] = (_id(value), _tuple((_id(k), _id(v)) for k, v in _list(_dict.items(value))[:10_000]))
        else:
            out[name] = _id(value)
    for name, _value, _kind, _given_state_ in _state.given:  # the exercise's names and the built-ins: rebinding only
        out[f"given:{name}"] = _id(_dict.get(space, name, _MISSING))
    return out


def _check_bindings(space, before) -> None:
    """After the answer's code ran inside observe.call: the check's own names must be as they were. If not, this
    check's observations from here on are "not plain data" (they equal nothing) and the tripwire records why."""
    if before is None:
        return
    after = _bindings(space)
    changed = [n.removeprefix("given:") for n in _dict.fromkeys([*before, *after]) if before.get(n) != after.get(n)]
    if changed:
        object.__setattr__(_state, "poisoned", True)
        _sys.audit("graphcourse.tamper", "the check's own variables, changed by the answer's code while the check "
                                         f"ran: {', '.join(changed[:6])}")


def _from_check_code() -> bool:
    """Whether the code recording an observation is the grader's (a check cell, or helpers the check cells defined):
    no frame of the learner's answer is on the stack (an answer's function that calls observe is)."""
    if _get_ident() != _MAIN_THREAD:  # checks run on the kernel's main thread; a thread is the answer's
        return False
    return not _tripwire.from_answer(_sys._getframe(3))  # <- _put <- observe() or observe.call() <- the caller


_print = print
_said: dict = {"cell": None}


def _say_not_answered() -> None:
    """In a learner's notebook (not grading, not a self-check run), a check cell whose answer is still the stub says
    so once per cell run, instead of finishing silently "green"."""
    if _state.check is not None or _state.label != "notebook":
        return
    shell = _ipython()
    cell = getattr(shell, "execution_count", None) if shell is not None else None
    if cell is not None and cell == _said["cell"]:
        return
    _said["cell"] = cell
    _print("not answered yet: the answer cell above still raises NotImplementedError (write your answer, run "
           "it, then this check; check(\"<exercise id>\") gives the verdict)")


# --- used by the grader only (it runs these in cells of its own) ----------------------------------------

def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


_VOLATILE_BUILTINS = {"input", "raw_input", "getpass"}  # ipykernel swaps these for every request


def _ids(value):
    """The ids of a list's items, read with list's own iterator (a learner's list subclass runs none of its code)."""
    try:
        return [_id(x) for x in _list.__iter__(value)]
    except TypeError:
        return ["not a list", _id(value)]


def _exact_len(value):
    """len() of a list or tuple, never of anything else (a learner's object with __len__ would run its code here)."""
    return _len(value) if _type(value) in (_list, _tuple) else ("not a list", _id(value))


try:
    from _thread import _count as _thread_count  # every thread, those started with _thread too
except ImportError:  # pragma: no cover
    def _thread_count():
        return 0


def _snapshot() -> dict:
    """What learner code should not change: IPython's input and AST transformers, hooks, builtins, tracing, threads."""
    shell = _ipython()
    snap: dict = {}
    if shell is not None:
        for name in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers"):
            snap[name] = _ids(_getattr(shell, name, None))
        tm = _getattr(shell, "input_transformer_manager", None)
        if tm is not None:
            snap["transformer_manager"] = [_ids(_getattr(tm, n, None)) for n in
                                           ("cleanup_transforms", "line_transforms", "token_transformers")]
        for name in ("run_cell", "run_cell_async", "run_ast_nodes", "run_code", "showtraceback", "_showtraceback",
                     "set_custom_exc", "transform_cell", "ex", "ev", "reset", "run_line_magic", "run_cell_magic"):
            snap[f"shell.{name}"] = _id(_getattr(_type(shell), name, None)), name in _vars(shell)
        events = _getattr(shell, "events", None)
        callbacks = _getattr(events, "callbacks", {}) if events is not None else {}
        snap["events"] = ({k: _ids(v) for k, v in _dict.items(callbacks)} if _isinstance(callbacks, _dict)
                          else ("not a dict", _id(callbacks)))
        custom = _getattr(shell, "custom_exceptions", ())
        snap["custom_exceptions"] = _repr(custom) if _type(custom) is _tuple and all(
            _type(c) is type for c in custom) else f"not a tuple of classes: {_id(custom)}"
        kernel = _getattr(shell, "kernel", None)
        if kernel is not None:
            handlers = _getattr(kernel, "shell_handlers", {}) or {}
            snap["kernel.handlers"] = {k: _id(v) for k, v in _dict.items(handlers)}
    snap["builtins"] = {k: _id(v) for k, v in _vars(_builtins_module).items() if k not in _VOLATILE_BUILTINS and (
        not k.startswith("_") or k in ("__import__", "__build_class__"))}
    snap["trace"] = (_id(_sys.gettrace()), _id(_sys.getprofile()))
    snap["hooks"] = (_id(_sys.displayhook), _exact_len(_sys.meta_path), _exact_len(_sys.path_hooks),
                     _id(_getattr(_sys, "audit_hooks", None)))
    # threads Python knows of, and those started with _thread directly (threading.enumerate() does not list them)
    snap["threads"] = max(_len(_threading.enumerate()), _thread_count() + 1)
    snap["warnings"] = (_id(_getattr(_warnings, "showwarning", None)), _id(_getattr(_warnings, "warn", None)),
                        _id(_getattr(_warnings, "formatwarning", None)), _id(_getattr(_warnings, "warn_explicit", None)))
    course = {}
    for name, mod in _list(_sys.modules.items()):
        if not (name == "toygraph" or name.startswith("toygraph.") or name.startswith("graphcourse")):
            continue
        d = _getattr(mod, "__dict__", None)
        if _type(d) is not _dict:
            continue
        entries = {}
        for k, v in _list(d.items()):
            if not callable(v):
                continue
            entries[k] = _id(v)
            if _isinstance(v, type) and _getattr(v, "__module__", None) == name:
                for ck, cv in _list(_vars(v).items()):
                    if callable(cv) or _isinstance(cv, (staticmethod, classmethod, property)):
                        entries[f"{k}.{ck}"] = _id(cv)
        course[name] = entries
    snap["course"] = course
    snap["observe"] = {k: _id(v) for k, v in globals().items() if not k.startswith("__")}
    snap["observe.methods"] = [_id(_vars(_Observe).get(n)) for n in ("__call__", "call", "_put")]
    return snap


def _differences(before: dict, after: dict) -> list[str]:
    out = []
    for key in _sorted(set(before) | set(after)):
        if before.get(key) == after.get(key):
            continue
        if key == "builtins":
            b, a = before.get(key) or {}, after.get(key) or {}
            changed = _sorted(k for k in set(b) | set(a) if b.get(k) != a.get(k))
            out.append(f"builtins changed: {', '.join(changed[:8])}")
        elif key == "course":
            b, a = before.get(key) or {}, after.get(key) or {}
            changed = [f"{m}.{k}" for m in _sorted(set(b) & set(a)) for k in _sorted(set(b[m]) & set(a[m]))
                       if b[m][k] != a[m][k]]
            changed += [f"{m}.{k}" for m in _sorted(set(b) & set(a)) for k in _sorted(set(b[m]) - set(a[m]))]
            if changed:
                out.append(f"the course's code was changed: {', '.join(changed[:6])}")
        elif key == "threads":
            out.append(f"threads still running: {after.get(key, 0) - before.get(key, 0)} more than before the answer")
        elif key.startswith("observe"):
            out.append("the grading module graphcourse.grading.observe was changed")
        else:
            out.append(f"{key} changed")
    return out


def _save_process_state() -> None:
    """Right after the preamble of a fresh kernel: remember the warning filters, for _restore_process_state."""
    _state.warning_filters = _tuple(_warnings.filters)


def _restore_process_state() -> None:
    """Between two exercises in one kernel: the warning filters as the fresh kernel had them.

    A namespace reset leaves module state alone; an answer that appended to warnings.filters (which no
    snapshot flags, since importing a library may do the same) would otherwise change what a later
    exercise's checks see."""
    saved = _getattr(_state, "warning_filters", None)
    if saved is not None:
        _warnings.filters[:] = _list(saved)
        mutated = _getattr(_warnings, "_filters_mutated", None)  # the module's cache of filters (3.11-3.13)
        if mutated is not None:
            mutated()


BUILTIN_NAMES = frozenset(_vars(_builtins_module))  # Python's built-in names (verdict names them in feedback)
_type_setattr, _type_delattr = type.__setattr__, type.__delattr__
_FunctionType = _type(_plain)


def _function_parts(value) -> tuple:
    """What makes a function behave as it does, beyond its identity: its code and its defaults."""
    return (_getattr(value, "__code__", None), _getattr(value, "__defaults__", None),
            _getattr(value, "__kwdefaults__", None))


def _set_function_parts(value, parts) -> None:
    code, defaults, kwdefaults = parts
    _FunctionType.__code__.__set__(value, code)
    _FunctionType.__defaults__.__set__(value, defaults)
    _FunctionType.__kwdefaults__.__set__(value, kwdefaults)


def _given_state(value):
    """What of a given object the answer cell could change in place, for _restore_given: a function's code and
    defaults, a class's attributes (and its methods' code), or a list's, dict's or tuple's data (as JSON text, to
    compare, and a copy to put back when it is plain data)."""
    if _type(value) is _FunctionType:
        return "function", _function_parts(value)
    if _type(value) is type:
        attrs = _dict(_vars(value))
        return "class", (attrs, {k: _function_parts(v) for k, v in _dict.items(attrs) if _type(v) is _FunctionType})
    if _type(value) in (_dict, _list, _tuple):
        text = _dumps(plain(value), sort_keys=True, default=_repr)
        return "data", (text, _plain_copy(value) if _plain_only(value) else _MISSING)
    return None, None


def _plain_copy(value):
    """A deep copy of data _plain_only accepted, made by this module alone (the copy module's tables are the answer's
    to change)."""
    t = _type(value)
    if t is _list:
        return [_plain_copy(v) for v in value]
    if t is _tuple:
        return _tuple(_plain_copy(v) for v in value)
    if t is _dict:
        return {k: _plain_copy(v) for k, v in _dict.items(value)}
    return value


def _plain_only(value, depth=0) -> bool:
    """Whether value holds exact built-in types only (a deep copy of it runs no code of anyone's)."""
    t = _type(value)
    if t in (_bool, _int, _float, _str, _NoneType):
        return True
    if depth > MAX_DEPTH:
        return False
    if t is _list or t is _tuple:
        return _all(_plain_only(v, depth + 1) for v in value)
    if t is _dict:
        return _all(_type(k) is _str and _plain_only(v, depth + 1) for k, v in _dict.items(value))
    return False


def _given(space, names: tuple) -> tuple:
    """(name, value, kind, state) of each name the check cells read but do not bind, as the set-up and context cells
    left it: a name they bound, or a built-in (value _MISSING: nothing in the notebook's namespace shadows it).
    `__builtins__` too, where every name the namespace lacks is looked up."""
    out = []
    for name in ("__builtins__",) + _tuple(n for n in names if _type(n) is _str and n != "__builtins__"):
        value = _dict.get(space, name, _MISSING)
        if value is _MISSING and name not in BUILTIN_NAMES:
            continue  # a name the answer defines (the function a check calls)
        kind, state = _given_state(value) if value is not _MISSING else (None, None)
        out.append((name, value, kind, state))
    return _tuple(out)


def _restore_given(space) -> tuple[list, list]:
    """Put back what the answer cell rebound or changed of the names the checks read (see _given): a check must see
    the exercise's own SharedPool and Python's own len, whatever the answer cell defined at its top level.
    (restored names, names whose data the answer cell changed in place, which cannot be put back)."""
    restored, changed = [], []
    for name, value, kind, state in _state.given:
        now = _dict.get(space, name, _MISSING)
        if now is not value:
            if value is _MISSING:
                _dict.pop(space, name, None)
            else:
                _dict.__setitem__(space, name, value)
            restored.append(name)
        if kind == "function" and _function_parts(value) != state:
            _set_function_parts(value, state)
            restored.append(name)
        elif kind == "class":
            attrs, methods = state
            now_attrs = _dict(_vars(value))
            touched = False
            for k in _list(now_attrs):
                if k not in attrs:
                    _type_delattr(value, k)
                    touched = True
            for k, v in _dict.items(attrs):
                if now_attrs.get(k, _MISSING) is not v:
                    _type_setattr(value, k, v)
                    touched = True
            for k, parts in _dict.items(methods):
                if _function_parts(attrs[k]) != parts:
                    _set_function_parts(attrs[k], parts)
                    touched = True
            if touched:
                restored.append(name)
        elif kind == "data" and _dumps(plain(value), sort_keys=True, default=_repr) != state[0]:
            saved = state[1]
            if saved is not _MISSING and _type(value) is _list:
                _list.__setitem__(value, _slice(None), _plain_copy(saved))
                restored.append(name)
            elif saved is not _MISSING and _type(value) is _dict:
                _dict.clear(value)
                _dict.update(value, _plain_copy(saved))
                restored.append(name)
            else:  # a tuple's lists, or data holding objects: cannot be put back in place
                changed.append(name)
    return _list(_dict.fromkeys(restored)), changed


def _rebound(space) -> list:
    """The names of _state.given that are bound to something else now (by the answer's code, during a check)."""
    return [name for name, value, _kind, _state_ in _state.given if _dict.get(space, name, _MISSING) is not value]


def _baseline(names: tuple = ()) -> None:
    """Snapshot the kernel after the given cells, before the learner's answer runs; remember what the names the check
    cells read but do not bind are bound to (see _given)."""
    _state.baseline = _snapshot()
    _state.given = _given(_sys._getframe(1).f_globals, _tuple(names))
    _state.given_checked = False


def _begin(check: str, seed: int, names: tuple = ()) -> None:
    """A check starts (the grader's header): its id, the hidden inputs' seed, and the names the exercise's check cells
    bind (which the answer's code must leave alone while a check runs)."""
    _state.check = check
    _state.names = _tuple(n for n in names if _type(n) is _str)
    _state.space = _sys._getframe(1).f_globals  # the notebook's namespace, where the check cells run
    restored, changed = _restore_given(_state.space)
    first = not _state.given_checked  # before the first check: what the answer cell's top level changed
    _state.restored = _tuple(restored) if first else ()  # later: what a check's own run of the answer changed (an
    _state.given_flags = ()                               # answer's function that sorts the list it was given), put
    if changed and first:                                 # back so that every check starts from the given data
        _state.given_flags = (
            f"the answer cell changed data the exercise gives and the checks read: {', '.join(changed[:6])}",)
    _state.given_checked = True
    _state.poisoned = False
    _state.obs = _tripwire.SealedDict() if _tripwire.installed() else {}
    _state.hints = _tripwire.SealedDict() if _tripwire.installed() else {}
    inputs._seed(seed, check, hidden=True)


def _end(key_hex: str) -> None:
    """Emit this check's observations, signed with key_hex (substituted by the grader into this call only)."""
    flags = _differences(_state.baseline, _snapshot()) if _state.baseline is not None else ["no baseline"]
    flags += _list(_state.given_flags)
    rebound = _rebound(_state.space) if _state.space is not None else []
    if rebound:
        flags.append("the answer's code rebound names the checks read while the check ran: " + ", ".join(rebound[:6]))
    payload = {"check": _state.check, "obs": _state.obs, "hints": _state.hints, "flags": flags,
               "restored": _list(_state.restored)}
    try:
        text = _dumps(payload, sort_keys=False, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        text = _dumps({"check": _state.check, "obs": {}, "hints": {}, "flags": [f"observations not JSON: {exc}"]},
                      sort_keys=True, separators=(",", ":"))
    mac = _hmac_new(bytes.fromhex(key_hex), text.encode(), _sha256).hexdigest()
    if _tripwire.installed():
        _tripwire.end_flags(_state.check, flags)
        _tripwire.mark(_state.check)
    _state.check, _state.obs, _state.hints = None, {}, {}
    from IPython.display import publish_display_data

    publish_display_data({MIME: {"payload": text, "mac": mac}, "text/plain": "observations recorded"})
