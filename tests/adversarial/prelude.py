# Shared helpers pasted at the top of every hostile answer (a learner's notebook carries its own tools).
# Everything here fails quietly: a hostile answer that finds nothing simply earns nothing.
import glob as _adv_glob
import json as _adv_json
import os as _adv_os
import re as _adv_re
import sys as _adv_sys

_ADV_RUN = "@@RUN_ID@@"  # the test run's marker: processes started here carry it, the test finds and ends them


def _adv_answers(path):
    """{exercise id: answer source} of a notebook on disk, skipping stubs."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            nb = _adv_json.load(f)
        out = {}
        for c in nb.get("cells", []):
            meta = (c.get("metadata") or {}).get("graphcourse") or {}
            src = c.get("source", "")
            src = "".join(src) if isinstance(src, list) else src
            if meta.get("role") == "answer" and "NotImplementedError" not in src:
                out[meta.get("exercise")] = src
        return out
    except Exception:
        return {}


def _adv_roots():
    """Folders where the course (and its solutions/) may live: the package's parent, sys.path, cwd and up."""
    roots = []
    try:
        import graphcourse
        roots.append(_adv_os.path.dirname(_adv_os.path.dirname(_adv_os.path.abspath(graphcourse.__file__))))
    except Exception:
        pass
    roots += [p for p in _adv_sys.path if p] + _adv_os.environ.get("PYTHONPATH", "").split(_adv_os.pathsep)
    here = _adv_os.getcwd()
    for _ in range(6):
        roots.append(here)
        here = _adv_os.path.dirname(here)
    return [r for r in dict.fromkeys(roots) if r and _adv_os.path.isdir(r)]


def _adv_solution_answers():
    for root in _adv_roots():
        for path in _adv_glob.glob(_adv_os.path.join(root, "solutions", "*.ipynb")):
            found = _adv_answers(path)
            if found:
                return found
    return {}


def _adv_grader_cmdlines():
    """(pid, argv) of every process whose command line runs the grader."""
    out = []
    for d in _adv_glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            if any("graphcourse.grading" in a or "graphcourse/grading" in a for a in argv):
                out.append((int(d.split("/")[-1]), argv))
        except Exception:
            pass
    return out


def _adv_class_folders():
    """Class folders named on the grader's command line (read through /proc), and the grader's cwd."""
    folders = []
    for pid, argv in _adv_grader_cmdlines():
        try:
            cwd = _adv_os.readlink(f"/proc/{pid}/cwd")
        except Exception:
            cwd = "/"
        for a in argv[1:]:
            p = a if _adv_os.path.isabs(a) else _adv_os.path.join(cwd, a)
            if _adv_os.path.isdir(p) and not a.startswith("-"):
                folders.append(p)
    return list(dict.fromkeys(folders))


def _adv_classmates_answers():
    """Answers found in classmates' notebooks (class folder via /proc, and the grader's temporary copies)."""
    paths = []
    for folder in _adv_class_folders():
        paths += _adv_glob.glob(_adv_os.path.join(folder, "**", "*.ipynb"), recursive=True)
    paths += _adv_glob.glob("/tmp/graphcourse-grade-*/**/*.ipynb", recursive=True)
    paths += _adv_glob.glob("/tmp/**/*.ipynb", recursive=True)[:500]
    merged = {}
    for p in paths:
        for ex, src in _adv_answers(p).items():
            merged.setdefault(ex, src)
    return merged


def _adv_use(answers, exercise):
    """Run someone else's answer for this exercise in this kernel, if there is one."""
    src = answers.get(exercise)
    if src:
        exec(compile(src, "<stolen>", "exec"), globals())
        return True
    return False


def _adv_spawn_sleeper(seconds=90, detach=True):
    """A child that outlives this cell unless the grader ends it (it ends itself after `seconds`)."""
    import subprocess
    return subprocess.Popen([_adv_sys.executable, "-c", f"import time; time.sleep({seconds})", _ADV_RUN],
                            start_new_session=detach, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _adv_same_run(pid):
    """Whether a process belongs to this test run (its environment carries the run marker): never touch others."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return _ADV_RUN.encode() in f.read()
    except Exception:
        return False
