"""A static look at an answer for code that touches the grading machinery: such answers need a human's review.

The verdict never depends on the learner's kernel (see ``verdict``), so these flags are a second line: they catch
answers that try to change how the kernel runs the checks, read files or processes, or patch the course's code.
A flagged exercise earns nothing until an instructor clears it (``--allow-reviewed``). Each flag names the line.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import time
from pathlib import Path

# Modules an answer has no business importing in this course: the interpreter's and IPython's internals, the
# operating system, processes, files, the network, the grader.
MODULES = {
    "sys", "os", "posix", "nt", "subprocess", "signal", "ctypes", "_ctypes", "cffi", "gc", "inspect", "importlib",
    "builtins", "__builtin__", "threading", "_thread", "multiprocessing", "concurrent", "socket", "ssl", "asyncio",
    "pathlib", "shutil", "glob", "io", "_io", "tempfile", "fcntl", "resource", "pty", "tty", "mmap", "atexit",
    "faulthandler", "code", "codeop", "marshal", "pickle", "dill", "cloudpickle", "types", "traceback", "linecache",
    "runpy", "pkgutil", "zipimport", "sysconfig", "site", "IPython", "ipykernel", "jupyter_client", "jupyter_core",
    "nbformat", "nbclient", "zmq", "tornado", "graphcourse", "weakref", "urllib", "http", "requests", "pdb", "bdb",
    "trace", "dis", "ast", "tokenize", "select", "selectors", "pwd", "grp", "psutil", "sched", "webbrowser",
    "unittest", "doctest", "timeit", "_thread", "_posixsubprocess", "_weakref", "_weakrefset", "copyreg", "pydoc",
    "string",
}
# a module an answer did not import, reached as another module's attribute (logging.sys, logging.os): flagged too
MODULE_ATTRS = {
    "sys", "os", "posix", "subprocess", "signal", "ctypes", "_ctypes", "gc", "inspect", "importlib", "builtins",
    "threading", "_thread", "multiprocessing", "socket", "linecache", "traceback", "marshal", "pickle", "weakref",
    "pdb", "bdb", "doctest", "runpy", "mmap", "resource", "fcntl", "pty", "atexit", "faulthandler", "shutil",
    "tempfile", "_io", "io", "IPython", "ipykernel", "zmq", "tornado", "graphcourse", "tripwire", "observe",
    "operator", "functools", "copyreg", "types", "codeop", "dis", "timeit",
}
# graphcourse pieces an answer may use (the lessons' helpers), when an exercise asks for them
ALLOWED_SUBMODULES = {"graphcourse.lessons.teaching", "graphcourse.gpulib.graphs"}
NAMES = {
    "eval": "evaluates a string as code", "exec": "executes a string as code", "compile": "compiles a string as code",
    "__import__": "imports by name at run time", "globals": "reaches the kernel's global namespace",
    "locals": "reads a frame's local names", "vars": "reads an object's namespace",
    "attrgetter": "reads attributes by name", "methodcaller": "calls methods by name",
    "update_wrapper": "copies attributes by name (setattr in disguise)",
    "wraps": "copies attributes by name, into __dict__ too (setattr in disguise)", "get_type_hints": "evaluates strings as code",
    "ForwardRef": "evaluates a string as code", "Formatter": "reads attributes named in a string",
    "get_field": "reads attributes named in a string", "locate": "finds any object by a dotted name",
    "resolve_name": "finds any object by a dotted name",
    "get_ipython": "reaches IPython, which runs the checks", "__builtins__": "reaches the builtins",
    "breakpoint": "starts a debugger", "open": "opens files (answers need none)", "setattr": "sets attributes by name",
    "delattr": "deletes attributes by name", "getattr": "reads attributes by name", "exit": "ends the kernel",
    "quit": "ends the kernel", "memoryview": "reads raw memory", "input": "waits for keyboard input",
}
ATTRS = {
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "gi_frame", "cr_frame", "ag_frame",
    "tb_frame", "tb_next", "_getframe", "_current_frames", "settrace", "setprofile", "meta_path",
    "path_hooks", "addaudithook", "excepthook", "displayhook", "input_transformers_cleanup",
    "input_transformers_post", "input_transformer_manager", "ast_transformers", "run_cell", "run_cell_async",
    "run_code", "run_ast_nodes", "callbacks", "get_type_hints", "ForwardRef", "get_field", "locate", "resolve_name", "set_custom_exc", "showtraceback", "kernel", "shell_handlers",
    "user_ns", "user_global_ns", "kill", "killpg", "_exit", "abort", "fork", "forkpty", "system", "popen",
    "execv", "execve", "spawn", "setuid", "setsid", "ptrace", "__globals__", "__code__", "__closure__",
    "__subclasses__", "__bases__", "__mro__", "__dict__", "__class__", "__builtins__", "__import__",
    "__getattribute__", "__setattr__", "__delattr__", "__reduce__", "__reduce_ex__", "__loader__", "__spec__",
    "__defaults__", "__kwdefaults__", "co_code", "replace", "_state", "_end", "_begin", "_baseline",
    "attrgetter", "methodcaller", "update_wrapper", "_start_new_thread", "start_new_thread", "__setitem__",
    "__delitem__", "__set__", "__get__", "__delete__", "__set_name__", "_channel", "_recorder", "cell_contents",
    "__func__", "__self__", "__wrapped__", "__traceback__", "__context__", "__cause__", "f_lasti", "co_consts",
}
# `.replace` is str.replace too: only flagged on code objects (a name ending with co / code)
PATHS = ("/proc", "/sys", "/dev", "/etc", "/work", "/root", "/home", "/tmp", "solutions", ".ipynb", "..")


# methods of everyday objects that share a name with a builtin the scan flags: re.compile, torch.compile,
# model.eval(), a file's .open(), model.modules()
_HONEST_METHODS = {"open", "compile", "eval", "input", "exit"}
# list.pop(obj, 0), object.__setattr__(obj, ...): a built-in type's own method called on an object, which skips the
# methods that object's class defines (the toy's guarded lists and dicts)
_BASE_TYPES = {"list", "dict", "set", "object", "type", "bytearray", "deque", "OrderedDict", "defaultdict"}
_BASE_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update", "setdefault",
                  "popitem", "add", "discard", "difference_update", "intersection_update", "symmetric_difference_update",
                  "appendleft", "extendleft", "popleft", "rotate", "move_to_end", "__init__", "__setattr__",
                  "__delattr__", "__setitem__", "__delitem__", "__iadd__", "__imul__", "__ior__", "__iand__"}
_COURSE_PACKAGES = ("toygraph", "graphcourse")


@functools.cache
def toy_private_names() -> frozenset[str]:
    """The private names toygraph's own code uses (module names, attributes it sets or reads: `_storage`,
    `_joined_up_to`, `_IN_KERNEL`): its state, which no answer needs to reach. Read from its source files."""
    spec = importlib.util.find_spec("toygraph")
    names: set[str] = set()
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for path in sorted(Path(folder).glob("*.py")):
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                name = (node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name)
                        else node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                        else "")
                if name.startswith("_") and not name.startswith("__") and len(name) > 1:
                    names.add(name)
    return frozenset(names)


def _type_call(node, type_names=frozenset({"type"})) -> bool:
    """type(x), or T(x) after T = type: the class of an object, whose base methods skip the object's own
    (type(sg.deps).update)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in type_names \
        and len(node.args) == 1


_ODD_METHODS = {"__eq__", "__ne__", "__hash__", "__bool__", "__instancecheck__", "__subclasscheck__", "__getattr__",
                "__getattribute__", "__del__", "__init_subclass__", "__class_getitem__", "__set_name__", "__lt__",
                "__le__", "__gt__", "__ge__", "__contains__", "__index__"}
_DUNDER = re.compile(r"__(?!init__|name__|main__|future__|file__|doc__|version__)[A-Za-z_]+__")

MAX_CHARS = 200_000
"""An answer longer than this is not read statically (a course answer is a few dozen lines): it is held for review."""
TIME_S = 10.0
"""The static review's time budget per answer; past it the answer is held for review, never waited on."""


def scan(source: str, time_s: float = TIME_S) -> list[str]:
    """Reasons (with line numbers) this answer needs a human's review; empty when none.

    Bounded in size (:data:`MAX_CHARS`) and time (:data:`TIME_S`): a notebook built to make the review slow
    is held for review with that reason, and the grader goes on with the class.
    """
    if len(source) > MAX_CHARS:
        return [f"the answer is {len(source):,} characters long, too long to review automatically "
                f"(the limit is {MAX_CHARS:,}): read it"]
    deadline = time.monotonic() + time_s
    source_lines = source.splitlines()
    lines = "\n".join(l if not l.lstrip().startswith(("%", "!")) else "#" + l for l in source_lines)
    flags: list[str] = []
    for number, line in enumerate(source_lines, 1):
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            flags.append(f"line {number}: a shell or magic command ({stripped[:40]!r})")
    try:
        tree = ast.parse(lines)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return list(dict.fromkeys(flags))  # it will not run either; the verdict says so
    assigned = _local_names(tree)
    top_level = _top_level_names(tree)
    private = toy_private_names()
    assigns = [(node.value, [t.id for t in node.targets if isinstance(t, ast.Name)]) for node in ast.walk(tree)
               if isinstance(node, ast.Assign)]
    type_names = _aliases(assigns, {"type"},  # _kind = type; _kind({})
                          lambda value, names: isinstance(value, ast.Name) and value.id in names)
    base_aliases = _aliases(assigns, set(), lambda value, names: _type_call(value, type_names) or (  # T = type(sg.deps)
        isinstance(value, ast.Name) and (value.id in _BASE_TYPES or value.id in names)))  # D = dict; E = D
    foreign = _aliases(assigns, _imported_names(tree),  # modules and what they hold, under the answer's own names
                       lambda value, names: isinstance(value, (ast.Name, ast.Attribute)) and _root(value) in names)

    def add(node, what):
        flags.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    for count, node in enumerate(ast.walk(tree)):
        if count % 512 == 0 and time.monotonic() > deadline:
            flags.append(f"the static review ran past {time_s:g} s on this answer (built to be slow to read?): read it")
            break
        if isinstance(node, ast.Import):
            for a in node.names:
                if _bad_module(a.name):
                    add(node, f"imports {a.name}")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                add(node, "a relative import")
            elif _bad_module(mod):
                add(node, f"imports from {mod}")
            for a in node.names:
                if a.name in NAMES or a.name in ATTRS:
                    add(node, f"imports {a.name} ({NAMES.get(a.name, 'grading machinery')})")
                elif a.name.startswith("_") and mod.split(".")[0] in _COURSE_PACKAGES:
                    add(node, f"imports {a.name}, a private name of {mod} (the course's own state)")
        elif isinstance(node, ast.Name) and node.id in NAMES and node.id not in assigned:
            add(node, f"uses {node.id} ({NAMES[node.id]})")
        elif isinstance(node, ast.Attribute):
            if node.attr in ATTRS and not (node.attr == "replace" and not _codeish(node.value)):
                add(node, f"uses .{node.attr}")
            elif node.attr in MODULE_ATTRS and isinstance(node.value, (ast.Name, ast.Attribute)) \
                    and _root(node) not in assigned:
                add(node, f"reaches the module {node.attr} through {_short(node.value)} (a module the answer did "
                          "not import)")
            elif node.attr in NAMES and node.attr not in _HONEST_METHODS:
                add(node, f"uses .{node.attr}")
            elif node.attr in _BASE_MUTATORS and isinstance(node.value, ast.Name) and node.value.id in _BASE_TYPES \
                    and node.value.id not in assigned:
                add(node, f"calls {node.value.id}.{node.attr} on an object, past that object's own methods")
            elif node.attr in _BASE_MUTATORS and node.attr != "__init__" and (
                    _type_call(node.value, type_names) or isinstance(node.value, ast.Name)
                    and node.value.id in base_aliases):
                add(node, f"calls {'type(...)' if isinstance(node.value, ast.Call) else _short(node.value)}.{node.attr}: "
                          "a class's own method on an object, past that object's own methods")
            elif node.attr in private and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                add(node, f"reaches {_short(node)}, a private name the toy keeps (its own state)")
            elif node.attr == "__init__" and isinstance(node.value, (ast.Attribute, ast.Subscript)):
                add(node, f"runs __init__ again on {_short(node.value)}, an object that exists already")
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                root = _root(node)
                if root is None or root not in assigned or root in foreign:
                    add(node, f"changes {_short(node)}, which the answer did not create "
                              "(patching the course's code or a module)")
        elif isinstance(node, ast.Global):
            for n in node.names:  # a cache the answer keeps at its top level is its own; any other global is not
                if n not in top_level:
                    add(node, f"declares global {n}, which the answer does not define at its top level (a name of "
                              "the checks'?)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if _DUNDER.search(text):
                add(node, f"names a dunder attribute in a string ({_DUNDER.search(text).group(0)!r}): an attribute "
                          "reached by name")
            for p in PATHS:
                if p in text and _pathish(text):
                    add(node, f"names a path ({text[:40]!r})")
                    break
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _ODD_METHODS:
            add(node, f"defines {node.name} (an object that compares or behaves unlike plain data)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" \
                and len(node.args) == 2 and not (isinstance(node.args[1], ast.Name) and node.args[1].id in ("self", "cls")):
            add(node, "calls super(...) on an object that is not self: its base class's methods, past its own")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:  # __eq__ = some_function: the same as defining it
                if isinstance(item, (ast.Assign, ast.AnnAssign)):
                    for t in item.targets if isinstance(item, ast.Assign) else [item.target]:
                        if isinstance(t, ast.Name) and t.id in _ODD_METHODS:
                            add(item, f"defines {t.id} (an object that compares or behaves unlike plain data)")
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in ("int", "float", "str", "list", "dict", "tuple", "bool",
                                                              "type", "BaseException", "Exception", "SystemExit",
                                                              "KeyboardInterrupt", "AssertionError"):
                    add(node, f"subclasses {base.id}")
            for kw in node.keywords:
                if kw.arg == "metaclass":
                    add(node, "uses a metaclass")
    return list(dict.fromkeys(flags))


def _bad_module(name: str) -> bool:
    if name in ALLOWED_SUBMODULES:
        return False
    top = name.split(".")[0]
    return top in MODULES or name.startswith("toygraph._")


def _codeish(node) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name.endswith(("__code__", "co", "code"))


def _short(node) -> str:
    """A short name for an attribute target (ast.unparse of a long chain costs time per flag)."""
    parts = []
    while isinstance(node, ast.Attribute) and len(parts) < 6:
        parts.append(node.attr)
        node = node.value
    head = node.id if isinstance(node, ast.Name) else "..."
    return ".".join([head, *reversed(parts)])[:60]


def _pathish(text: str) -> bool:
    return "/" in text or "\\" in text or text.endswith(".ipynb") or text == "solutions"


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _imported_names(tree) -> set[str]:
    """Names an import binds: a module, or something a module holds."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def _aliases(assigns: list, seed: set[str], follows) -> set[str]:
    """seed, and the names assigned (`target = value`) from a value that follows(value, names so far) accepts, and
    from those in turn (aliases of aliases, a few deep): `_js = json; _m = _js` from the imported names, say."""
    names = set(seed)
    for _ in range(8):
        grown = {t for value, targets in assigns if follows(value, names) for t in targets} - names
        if not grown:
            break
        names |= grown
    return names


def _top_level_names(tree) -> set[str]:
    """Names the answer binds in its own top-level statements (not inside its functions or classes)."""
    names: set[str] = set()
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.add(child.id)
            elif not isinstance(child, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.append(child)
    return names


def _local_names(tree) -> set[str]:
    """Names the answer itself binds (parameters, assignments, loop variables, defs), anywhere in it."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names
