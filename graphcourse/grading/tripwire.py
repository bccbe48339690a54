"""The grader's tripwire in a learner's kernel: what an answer does to the grading machinery leaves the kernel at once.

A learner's answer runs in the same Python process as the check cells that call it, so in principle it can reach
anything the checks use. The grader therefore does not trust anything the kernel says about itself after the answer
ran; it trusts what left the kernel *before* the answer could act. The grader's preamble installs this module in
every graded kernel before any learner code runs (never in a learner's own notebook):

1. **A channel out.** A pipe (a FIFO in the kernel's socket folder) whose reading end is the grader's, outside the
   sandbox. Every record below is written to it at once, with ``os.write``; once written, nothing in the kernel can
   take it back. After each check the footer writes a *mark* (the check's id and its number) through the same pipe:
   a check whose mark does not arrive is held for review (the footer did not run as written, or the pipe was cut).
2. **An audit hook** (PEP 578: once added, it cannot be removed). For code of a cell (an answer, or code it
   compiled), it records what no answer needs: reading the interpreter's frames (``sys._getframe``, ``inspect``,
   ``traceback``), a function's ``__code__``, tracing and profiling, hunting objects through ``gc``, building code
   objects, ``exec``/``compile``/``eval`` called by the cell, ``ctypes``, starting processes or sending signals,
   another audit hook. It also records the refusals below (``graphcourse.tamper``) and the toy's
   (``toygraph.tamper``). Whether code is "of a cell" is decided by walking out from the code that acted: frames of
   the standard library are passed through; the first other frame decides: installed packages (IPython, torch, ...)
   and the course's own packages are trusted, anything else (a cell's file, ``<string>`` code a cell compiled) is not.
3. **Seals.** The course's modules (``toygraph``, ``graphcourse``) and ``builtins`` refuse attribute writes from a
   cell's code (``mock.patch`` of ``observe``, ``builtins.print = ...``); IPython's input and AST transformer lists,
   its event callbacks, the kernel's message handlers, and the shell's, kernel's and transformer manager's methods
   refuse changes from a cell's code. A refusal raises in the answer (which then usually fails its check) and is
   recorded through the channel, so the exercise is held for review with the reason.

What it does not do: an answer that works at the level of file descriptors (``os.dup2`` over the channel's pipe,
then writing forged marks into it) is not stopped here; it needs ``os`` and names the static review flags. See
docs/grading.md, "What the grader guarantees".

Standard library only: this module is imported by every graded kernel.
"""

from __future__ import annotations

import dataclasses as _dataclasses
import json as _json
import os as _os
import select as _select
import sys as _sys
import sysconfig as _sysconfig
import threading as _threading
import types as _types

_getframe = _sys._getframe
_write, _fstat, _wait_writable = _os.write, _os.fstat, _select.select
_dumps = _json.dumps
_ModuleType = _types.ModuleType
_str, _type, _len, _isinstance, _getattr, _id = str, type, len, isinstance, getattr, id

MAX_RECORDS = 200  # distinct records written per kernel; more add nothing an instructor needs

# events a cell's own code never needs; value: how the record describes it
_WATCHED = {
    "sys._getframe": "read the interpreter's frames (sys._getframe, inspect, traceback)",
    "sys._current_frames": "read every thread's frames (sys._current_frames)",
    "sys.settrace": "set a trace function (sys.settrace)",
    "sys.setprofile": "set a profile function (sys.setprofile)",
    "sys.addaudithook": "added an audit hook",
    "gc.get_objects": "hunted objects through the garbage collector (gc.get_objects)",
    "gc.get_referrers": "hunted objects through the garbage collector (gc.get_referrers)",
    "gc.get_referents": "hunted objects through the garbage collector (gc.get_referents)",
    "code.__new__": "built or changed a code object",
    "marshal.loads": "loaded code from bytes (marshal)",
    "exec": "ran code with exec()",
    "compile": "compiled code with compile(), eval() or exec()",
    "os.system": "started a process (os.system)",
    "subprocess.Popen": "started a process (subprocess)",
    "os.exec": "replaced the process (os.exec*)",
    "os.posix_spawn": "started a process (os.posix_spawn)",
    "os.spawn": "started a process (os.spawn*)",
    "os.fork": "forked the process",
    "os.forkpty": "forked the process",
    "os.kill": "sent a signal (os.kill)",
    "os.killpg": "sent a signal (os.killpg)",
    "signal.pthread_kill": "sent a signal to a thread",
}
_DIRECT_ONLY = {"exec", "compile", "sys._getframe", "object.__getattr__", "marshal.loads", "sys.settrace",
                "sys.setprofile", "object.__setattr__", "object.__delattr__"}  # stdlib helpers use these honestly
_FRAME_READERS = ("inspect", "traceback")  # ... except these modules, whose purpose is reading frames
# ... and these, whose purpose is running code given as text (doctest's examples, timeit's statements)
_CODE_RUNNERS = ("doctest", "code", "codeop", "runpy", "timeit", "pdb", "bdb", "trace", "profile", "cProfile",
                 "pydoc", "typing")
_RESTRICTED_GETATTR = "read a function's or frame's internals ({name})"
_RESTRICTED_NAMES = {"__code__", "__globals__", "__closure__", "f_back", "f_globals", "f_locals", "f_code", "tb_frame",
                     "gi_frame", "cr_frame", "ag_frame", "f_trace"}
_SETATTR_NAMES = {"__class__", "__code__", "__bases__"}


class _Channel:
    """Where records go: a file descriptor opened on the grader's pipe, and what was sent already."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.ident: tuple | None = None
        self.sent: set = set()
        self.count = 0
        self.marks = 0
        self.busy = _threading.local()


_channel = _Channel()
_main_thread = _threading.main_thread()
_trusted_dirs: tuple = ()
_stdlib_dirs: tuple = ()


def _kind(filename: str) -> str:
    """'stdlib' (passed through), 'trusted' (installed packages, the course) or 'cell' (anything else).

    Trust goes by where a file is (an absolute path under an installed package's or the course's folder), never by
    a word in its name: doctest names its examples ``<doctest NAME[0]>`` with a NAME its caller picks."""
    if filename.startswith(_trusted_dirs):
        return "trusted"
    if filename.startswith(("<frozen ", "<string>")) or filename.startswith(_stdlib_dirs):
        return "stdlib"
    return "cell"


_IPYTHON = ("/IPython/", "/ipykernel/", "/traitlets/")  # IPython's own API, called for a cell, acts for the cell
# The course's code that calls an answer's code for a check (observe.call, the check library, the stand-in CUDA's
# calling_with): what a built-in the answer hands over does there (functools.partial(setattr, ...) as a callable,
# exec as a key function) is done for the check cell that called, not by trusted code.
_ANSWER_CALLERS = tuple(f"{_os.sep}graphcourse{_os.sep}{part}.py" for part in (
    f"grading{_os.sep}observe", f"grading{_os.sep}checks", f"lessons{_os.sep}standin_cuda"))


def _frame_kind(frame) -> str:
    """_kind of a frame; code compiled from a string (``<string>``, ``<doctest ...>``...) is judged by the module
    whose globals it runs in: the answer's namespace (``__main__``) makes it the answer's code (typing's ForwardRef
    evaluates a string annotation there); a dataclass's generated methods run in their class's module."""
    filename = frame.f_code.co_filename
    if not filename.startswith("<") or filename.startswith("<frozen "):
        return _kind(filename)
    g = frame.f_globals
    name = g.get("__name__") if _isinstance(g, dict) else None
    if _type(name) is not _str or name == "__main__":
        return "cell"
    module = _sys.modules.get(name)
    if module is not None and _getattr(module, "__dict__", None) is not g:
        return "cell"  # a dict that only names a module (exec(src, {"__name__": "graphcourse..."})) is not its code
    path = _getattr(module, "__file__", None) if module is not None else None
    if _type(path) is _str:
        return _kind(path)
    return "stdlib" if name.startswith("namedtuple_") else "cell"


def culprit(frame, direct: bool = False, readers: tuple = (), through: tuple = (), strict: bool = False):
    """The frame of a cell that is behind what `frame` does, or None when trusted code is.

    Walks out from frame through the standard library; direct=True: only frame itself counts (standard-library
    helpers such as namedtuple use exec and sys._getframe for an honest caller), except through the modules named
    in readers; through: path fragments of installed packages whose frames are passed through too (IPython's
    ``events.register`` called by a cell acts for the cell; called by matplotlib, for matplotlib); strict=True
    (the seals): a stack that ends with no trusted frame (a thread whose target is a built-in like setattr) is
    nobody's trusted work, and its outermost frame is returned."""
    last = None
    while frame is not None:
        last = frame
        filename = frame.f_code.co_filename
        if through and any(part in filename for part in through):
            frame = frame.f_back
            continue
        kind = _frame_kind(frame)
        if kind == "cell":
            return frame
        if kind == "trusted":
            return None
        if direct:
            module = frame.f_globals.get("__name__") if _isinstance(frame.f_globals, dict) else None
            if module not in readers:
                return None  # a standard-library helper working for its caller (namedtuple's exec, dataclass's)
        frame = frame.f_back
    return last if strict else None


def _posing(frame) -> bool:
    """Code compiled under a trusted file's name by someone other than the import system or trusted code."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith("<frozen importlib"):
            return False
        kind = _kind(name)
        if kind == "trusted":
            return False
        if kind == "cell":
            return True
        frame = frame.f_back
    return True


def _outermost_cell(frame):
    found = None
    while frame is not None:
        if _kind(frame.f_code.co_filename) == "cell":
            found = frame
        frame = frame.f_back
    return found


def _where(frame) -> str:
    if frame is None:
        return ""
    code = frame.f_code
    name = "the cell" if code.co_name == "<module>" else f"{code.co_name}()"
    return f"{name}, line {frame.f_lineno}"


def _send(record: dict) -> None:
    """Write one record to the grader's pipe; raise (aborting what is being done) if the pipe is gone."""
    fd = _channel.fd
    if fd is None:
        return
    try:
        ident = _fstat(fd)
        if (ident.st_dev, ident.st_ino) != _channel.ident:
            raise OSError("the tripwire's pipe was replaced")
        _write(fd, (_dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode())
    except BlockingIOError:
        pass  # the grader has not read yet; what is in the pipe already holds this kernel for review
    except OSError as exc:
        raise RuntimeError(f"the grader's tripwire channel is broken ({exc}); this kernel is held for review") from None


MAX_OBSERVATION = 4_000_000  # characters of one observation sent through the pipe (the footer's payload: 2 MB)


def _send_all(record: dict) -> None:
    """Write one record whole, waiting (up to a minute) while the grader empties the pipe; raise if it cannot."""
    fd = _channel.fd
    if fd is None:
        return
    data = (_dumps(record, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n").encode()
    try:
        ident = _fstat(fd)
        if (ident.st_dev, ident.st_ino) != _channel.ident:
            raise OSError("the tripwire's pipe was replaced")
        while data:
            try:
                data = data[_write(fd, data):]
            except BlockingIOError:
                if not _wait_writable([], [fd], [], 60)[1]:
                    raise OSError("the grader stopped reading the pipe") from None
    except OSError as exc:
        raise RuntimeError(f"the grader's tripwire channel is broken ({exc}); this kernel is held for review") from None


_recorder: list = []  # the code object of observe's _put, registered when observe is imported (before any answer)


def register_recorder(code) -> None:
    if not _recorder:
        _recorder.append(code)


def observed(check: str, key: str, record: dict, hint, said=None) -> None:
    """An observation, as the check records it: the grader's copy leaves the kernel at once, out of the answer's
    reach (the footer's signed payload is only compared with these). Only observe's own recorder may send one,
    from the main thread, with no frame of the answer on the stack."""
    caller = _getframe(1)
    if not _recorder or caller.f_code is not _recorder[0] or _threading.current_thread() is not _main_thread \
            or from_answer(caller):
        refuse("an observation sent to the grader by something other than the check")
    line = {"obs": key, "check": check, "record": record}
    if hint is not None:
        line["hint"] = hint
    if _type(said) is _str:  # the exception's message, for the feedback only: never part of the compared record
        line["said"] = said[:500]
    try:
        size = _len(_dumps(line, ensure_ascii=True, separators=(",", ":"), allow_nan=False))
    except (TypeError, ValueError):
        size = MAX_OBSERVATION + 1
    if size > MAX_OBSERVATION:
        line = {"obs": key, "check": check, "record": {"value": {"unplain": "too large to record"}}}
    _send_all(line)


def record(what: str, frame=None) -> None:
    """Record that code of a cell did `what` (once per what and place)."""
    where = _where(frame)
    key = (what, where, frame.f_code.co_filename if frame is not None else "")
    if key in _channel.sent or _channel.count >= MAX_RECORDS:
        return
    _channel.sent.add(key)
    _channel.count += 1
    _send({"flag": what, "where": where})


def _hook(event: str, args: tuple) -> None:
    busy = _channel.busy
    if _getattr(busy, "on", False):
        return
    described = _WATCHED.get(event)
    tamper = event in ("graphcourse.tamper", "toygraph.tamper")
    if described is None and not tamper:
        if event.startswith("ctypes."):
            described = f"used ctypes ({event})"
        elif event == "object.__getattr__" and _len(args) > 1 and args[1] in _RESTRICTED_NAMES:
            described = _RESTRICTED_GETATTR.format(name=args[1] if _len(args) > 1 else "?")
        elif event in ("object.__setattr__", "object.__delattr__") and _len(args) > 1 and args[1] in _SETATTR_NAMES:
            described = f"changed an object's {args[1]}"
        else:
            return
    busy.on = True
    try:
        frame = _getframe(1)
        if tamper:
            what = f"changed what the {'toy' if event.startswith('toygraph') else 'grader'} keeps: {args[0] if args else '?'}"
            found = frame
            while found is not None and _kind(found.f_code.co_filename) != "cell":
                found = found.f_back
            record(what, found)
            return
        readers = (_FRAME_READERS if event in ("sys._getframe", "object.__getattr__") else
                   _CODE_RUNNERS if event in ("exec", "compile", "marshal.loads") else ())
        found = culprit(frame, direct=event in _DIRECT_ONLY, readers=readers,
                        through=_ANSWER_CALLERS if event in ("exec", "compile") else ())
        if found is not None:
            record(described, found)
        elif event in ("compile", "code.__new__") and _len(args) > 1 and _isinstance(args[1], _str) \
                and args[1].startswith(_trusted_dirs) and _posing(frame):
            record("compiled code under the file name of an installed package or of the course", _outermost_cell(frame))
    finally:
        busy.on = False


def refuse(what: str, frame=None) -> None:
    """A seal's refusal: recorded through the channel (with the cell behind it), then raised in the answer."""
    _sys.audit("graphcourse.tamper", what)
    raise AttributeError(f"{what}: the grader's machinery is sealed while grading; an answer must not change it "
                         "(this answer is held for an instructor's review)")


def _refuse_from_a_cell(what: str, caller, through: tuple = ()) -> None:
    """Refuse `what` when `caller`, the frame that called a sealed method (``_getframe(1)`` there), is a cell's
    code or works for one (passing through the frames of `through`'s packages as well)."""
    if culprit(caller, through=through + _ANSWER_CALLERS, strict=True) is not None:
        refuse(what)


class SealedModule(_ModuleType):
    """A module whose attributes code of a cell cannot set or delete (importing a submodule still works)."""

    def __setattr__(self, name, value):
        if name != "_" and not (  # builtins._: the display hook's last value; a submodule being imported
                _isinstance(value, _ModuleType) and _sys.modules.get(f"{self.__name__}.{name}") is value):
            _refuse_from_a_cell(f"{self.__name__}.{name} set", _getframe(1))
        _ModuleType.__setattr__(self, name, value)

    def __delattr__(self, name):
        _refuse_from_a_cell(f"{self.__name__}.{name} deleted", _getframe(1))
        _ModuleType.__delattr__(self, name)


class SealedType(type):
    """A metaclass: the class's methods cannot be replaced by a cell's code (``type(obj).method = ...``)."""

    def __setattr__(cls, name, value):
        _refuse_from_a_cell(f"{cls.__name__}.{name} replaced", _getframe(1))
        type.__setattr__(cls, name, value)

    def __delattr__(cls, name):
        _refuse_from_a_cell(f"{cls.__name__}.{name} deleted", _getframe(1))
        type.__delattr__(cls, name)


class _SealedList(list, metaclass=SealedType):
    """A list (IPython's transformers and event callbacks) that only trusted code changes."""

    __slots__ = ()

    def _guard(self, caller):
        if culprit(caller, through=_IPYTHON, strict=True) is not None:
            refuse("a list of IPython's (transformers, event callbacks) changed")


class SealedDict(dict, metaclass=SealedType):
    """A dict (IPython's event callbacks, the kernel's message handlers, a check's observations) that only trusted
    code changes."""

    __slots__ = ()

    def _guard(self, caller):
        if culprit(caller, through=_IPYTHON, strict=True) is not None:
            refuse("a table of the grader's, IPython's or the kernel's changed")

    def setdefault(self, k, d=None):
        if k not in self:
            self._guard(_getframe(1))
        return dict.setdefault(self, k, d)


def _install_guards(cls: type, names: tuple[str, ...]) -> None:
    """Give `cls` its base's methods of these names, each first asking ``cls._guard`` about the frame that called it
    (which refuses a cell's code), then doing what the base's method does, with its return value."""
    base = cls.__mro__[1]

    def guarded_version(method):
        def guarded(self, *args, **kwargs):
            self._guard(_getframe(1))
            return method(self, *args, **kwargs)

        guarded.__name__ = method.__name__
        guarded.__qualname__ = f"{cls.__name__}.{method.__name__}"
        return guarded

    for name in names:
        type.__setattr__(cls, name, guarded_version(getattr(base, name)))  # past SealedType's own refusal


_install_guards(_SealedList, ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "__setitem__",
                              "__delitem__", "__iadd__", "__imul__"))
_install_guards(SealedDict, ("__setitem__", "__delitem__", "update", "pop", "popitem", "clear", "__ior__"))


def seal_instance(obj, names: set) -> None:
    """Give obj a class of its own whose __setattr__/__delattr__ refuse, from a cell's code, the given names."""
    base = _type(obj)

    def __setattr__(self, name, value, _base=base):
        if name in names:
            _refuse_from_a_cell(f"{_base.__name__}.{name} replaced", _getframe(1), _IPYTHON)
        _base.__setattr__(self, name, value)

    def __delattr__(self, name, _base=base):
        if name in names:
            _refuse_from_a_cell(f"{_base.__name__}.{name} deleted", _getframe(1), _IPYTHON)
        _base.__delattr__(self, name)

    sealed = _type(base.__name__, (base,), {"__setattr__": __setattr__, "__delattr__": __delattr__,
                                           "__module__": base.__module__})
    try:
        obj.__class__ = sealed
    except TypeError:
        pass


_SHELL_NAMES = {"run_cell", "run_cell_async", "run_ast_nodes", "run_code", "transform_cell", "transform_ast",
                "showtraceback", "_showtraceback", "set_custom_exc", "ex", "ev", "reset", "run_line_magic",
                "run_cell_magic", "input_transformers_cleanup", "input_transformers_post", "ast_transformers",
                "input_transformer_manager", "events", "compile", "display_pub", "displayhook", "custom_exceptions",
                "should_run_async", "user_ns", "user_global_ns", "kernel", "history_manager"}
_KERNEL_NAMES = {"do_execute", "execute_request", "shell_handlers", "control_handlers", "dispatch_shell",
                 "process_one", "session", "iopub_socket", "shell"}
_MANAGER_NAMES = {"transform_cell", "cleanup_transforms", "line_transforms", "token_transformers", "do_token_transforms",
                  "do_one_token_transform", "check_complete"}
_SESSION_NAMES = {"send", "serialize", "sign", "auth", "key"}


def _seal_ipython() -> None:
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    for name in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers"):
        current = _getattr(shell, name, None)
        if _type(current) is list:
            try:
                setattr(shell, name, _SealedList(current))
            except (AttributeError, TypeError):  # a property over the transformer manager's list: sealed there
                pass
    manager = _getattr(shell, "input_transformer_manager", None)
    if manager is not None:
        for name in ("cleanup_transforms", "line_transforms", "token_transformers"):
            current = _getattr(manager, name, None)
            if _type(current) is list:
                setattr(manager, name, _SealedList(current))
        seal_instance(manager, _MANAGER_NAMES)
    events = _getattr(shell, "events", None)
    callbacks = _getattr(events, "callbacks", None)
    if _type(callbacks) is dict:
        sealed = SealedDict({k: _SealedList(v) if _type(v) is list else v for k, v in callbacks.items()})
        setattr(events, "callbacks", sealed)
        seal_instance(events, {"callbacks", "register", "unregister", "trigger"})
    kernel = _getattr(shell, "kernel", None)
    if kernel is not None:
        for name in ("shell_handlers", "control_handlers"):
            current = _getattr(kernel, name, None)
            if _type(current) is dict:
                setattr(kernel, name, SealedDict(current))
        session = _getattr(kernel, "session", None)
        if session is not None:
            seal_instance(session, _SESSION_NAMES)
        seal_instance(kernel, _KERNEL_NAMES)
    pub = _getattr(shell, "display_pub", None)
    if pub is not None:
        seal_instance(pub, {"publish", "session", "pub_socket", "_flush_streams"})
    seal_instance(shell, _SHELL_NAMES)


def _seal_modules() -> None:
    import builtins

    for name, module in list(_sys.modules.items()):
        if module is None or _type(module) is not _ModuleType:
            continue
        if name == "toygraph" or name.startswith(("toygraph.", "graphcourse")) or module is builtins:
            # (never sys: importlib makes every new module with type(sys), which would make them all sealed)
            try:
                module.__class__ = SealedModule
            except TypeError:
                pass


def install(pipe: str) -> None:
    """Open the grader's pipe, add the audit hook, seal: called once, by the grader's preamble, before any answer."""
    global _trusted_dirs, _stdlib_dirs
    if _channel.fd is not None:
        return
    paths = _sysconfig.get_paths()
    _stdlib_dirs = tuple({_os.path.abspath(p) + _os.sep for p in (paths.get("stdlib"), paths.get("platstdlib"),
                                                                  _os.path.dirname(_dataclasses.__file__)) if p})
    trusted = {_os.path.abspath(p) + _os.sep for p in (paths.get("purelib"), paths.get("platlib")) if p}
    for name in ("toygraph", "graphcourse"):
        module = _sys.modules.get(name)
        path = _getattr(module, "__file__", None)
        if path:
            trusted.add(_os.path.dirname(_os.path.abspath(path)) + _os.sep)
    _trusted_dirs = tuple(trusted)
    fd = _os.open(pipe, _os.O_WRONLY | _os.O_NONBLOCK | _os.O_CLOEXEC)
    st = _fstat(fd)
    _channel.ident = (st.st_dev, st.st_ino)
    _channel.fd = fd
    _sys.addaudithook(_hook)
    _seal_ipython()
    _seal_modules()
    _send({"installed": True})


def end_flags(check: str, flags: list) -> None:
    """The footer's review flags (what observe's snapshot found changed), also through the pipe: the footer's signed
    payload leaves the kernel through IPython's messages, which an answer that hooked their packing could rewrite
    (it can read the footer's key there too); the grader takes the union of the two."""
    _send_all({"end_flags": [_str(f)[:200] for f in flags[:50]], "check": _str(check)})


def mark(check: str) -> None:
    """The footer's mark: this check's observations are being signed by the grader's own code."""
    _channel.marks += 1
    _send_all({"mark": _str(check), "n": _channel.marks})


_answer_files: set = set()


def answer_cell(source: str) -> None:
    """Before the answer runs: remember the file name IPython will compile it under (its code is the learner's)."""
    try:
        from IPython import get_ipython

        name = get_ipython().compile.get_code_name(source, source, 0)
    except Exception:
        return
    if _isinstance(name, _str):
        _answer_files.add(name)


def from_answer(frame) -> bool:
    """Whether the answer's code is anywhere on the stack from frame out: its cell's file, or code compiled from a
    string that runs in the answer's namespace (no check cell makes such code)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename in _answer_files or (filename.startswith("<") and not filename.startswith("<frozen ")
                                         and _frame_kind(frame) == "cell"):
            return True
        frame = frame.f_back
    return False


def installed() -> bool:
    return _channel.fd is not None
