"""`make lab` and its set-up (bootstrap.py, graphcourse.authoring.mycopy).

`make lab` serves the repository root (lessons, exercises, the learner's copy and the toygraph
source all reachable) and opens on lesson 00; a taken port gives a clear message; the set-up
picks the CPU build of torch on Linux without an NVIDIA GPU and says why; a too-old Python is
refused with a message naming the fix. The learner's copy of the exercises is made once and
never overwritten: new exercises are merged in, answers untouched.

Tests start `make -o .venv/.course-installed-lab lab`: they run inside an environment that is set up
already (`make test` sets it up first), and must never reinstall it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import bootstrap  # noqa: E402  (the set-up script at the repository root)
from graphcourse.authoring import mycopy  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab_env(tmp_path: Path) -> dict:
    return {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
            "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_DATA_DIR": str(tmp_path / "data"),
            "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws")}


def _stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_make_lab_serves_the_release_and_opens_lesson_00(course_process, tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    proc = subprocess.Popen(
        ["make", "-s", "-o", ".venv/.course-installed-lab", "lab", f"PORT={port}",
         f"LAB_ARGS=--no-browser --IdentityProvider.token={token}"],
        cwd=ROOT, env=_lab_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        page, url, deadline = "", "", time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:  # the server's front page redirects to where `make lab` opens the course
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/?token={token}", timeout=5) as response:
                    page, url = response.read().decode(), response.geturl()
                    break
            except OSError:
                time.sleep(0.5)
        assert proc.poll() is None, f"make lab exited early:\n{proc.stdout.read()[-3000:]}"
        assert "JupyterLab" in page and "jupyter-config-data" in page
        assert url.split("?")[0].endswith("/lab/tree/notebooks/00_setup_check.ipynb"), url

        def listing(path=""):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/{path}?token={token}",
                                        timeout=10) as response:
                return {item["name"] for item in json.loads(response.read())["content"]}

        root = listing()
        assert {"notebooks", "exercises", "toygraph", "README.md", "my-work", "release.json"} <= root, root
        assert not {"solutions", "tests", "classroom", ".git"} & root, f"make lab serves the release, not the sources: {root}"
        assert "instructor" not in listing("docs")
        assert "01_the_big_idea.ipynb" in listing("notebooks")
        assert "capture.py" in listing("toygraph"), "the toygraph source the lessons invite learners to read"
        assert "06_exercises.ipynb" in listing("my-work"), "make lab makes the learner's copy"
        plugin = "@jupyterlab/docmanager-extension:plugin"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab/api/settings/{plugin}?token={token}",
                                    timeout=10) as response:
            settings = json.loads(response.read())
        viewers = settings["schema"]["properties"]["defaultViewers"]["default"]
        assert viewers.get("markdown") == "Markdown Preview", "README and other markdown open rendered"
    finally:
        _stop(proc)


def test_make_lab_says_so_when_the_port_is_taken(course_process):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = subprocess.run(["make", "-s", "-o", ".venv/.course-installed-lab", "lab", f"PORT={port}"],
                                cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"port {port} is already in use" in result.stderr
    assert f"make lab PORT={port + 1}" in result.stderr


def test_default_port_moves_on_when_8888_is_taken(capsys, monkeypatch):
    monkeypatch.setattr(bootstrap, "port_free", lambda port, host="127.0.0.1": port != bootstrap.DEFAULT_PORT)
    assert bootstrap.pick_port(None) == bootstrap.DEFAULT_PORT + 1
    assert "8888 is already in use" in capsys.readouterr().out


def test_too_old_python_is_refused_with_the_fix(capsys):
    with pytest.raises(SystemExit):
        bootstrap.check_python((3, 9, 7))
    err = capsys.readouterr().err
    assert "needs Python 3.11 or newer" in err and "3.9.7" in err and "PYTHON=python3.12" in err
    bootstrap.check_python((3, 11, 0))  # new enough: no exit


def test_bootstrap_runs_under_an_old_python_far_enough_to_say_so():
    """The script uses no syntax newer than Python 3.5, so an old python3 reaches the version check."""
    source = (ROOT / "bootstrap.py").read_text()
    assert not re.search(r"""\bf["']""", source), "no f-strings in bootstrap.py"
    assert ":=" not in source
    result = subprocess.run([sys.executable, str(ROOT / "bootstrap.py"), "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "lab" in result.stdout


def test_torch_choice_cpu_build_without_a_gpu_and_cuda_with_one():
    args, why = bootstrap.torch_choice(None, gpu=False, system="Linux", cpu_index_reachable=True)
    assert args == [bootstrap.DEFAULT_TORCH, "--index-url", bootstrap.CPU_INDEX] and "CPU build" in why
    args, why = bootstrap.torch_choice(None, gpu=False, system="Linux", cpu_index_reachable=False)
    assert args == [bootstrap.DEFAULT_TORCH] and "does not answer" in why and "wheelhouse" in why
    args, why = bootstrap.torch_choice(None, gpu=True, system="Linux")
    assert args == [bootstrap.DEFAULT_TORCH] and "CUDA" in why
    args, _ = bootstrap.torch_choice(None, gpu=False, system="Darwin")
    assert args == [bootstrap.DEFAULT_TORCH]
    args, why = bootstrap.torch_choice("torch==2.4.0 --index-url X", gpu=False, system="Linux")
    assert args == ["torch==2.4.0", "--index-url", "X"] and "as asked" in why


def test_wheelhouse_requirements_cover_the_project():
    reqs = bootstrap.requirements()
    names = {re.split(r"[<>=!\[ ]", r)[0].lower() for r in reqs}
    assert {"setuptools", "wheel", "jupyterlab", "nbval", "ipywidgets", "playwright", "hypothesis"} <= names
    assert "torch" not in names  # torch comes with its own index (CPU or CUDA build)


# --- the learner's own copy ------------------------------------------------------------------

def _answer(nb, exercise: str, code: str) -> None:
    for cell in nb.cells:
        meta = cell.metadata.get("graphcourse", {})
        if meta.get("exercise") == exercise and meta.get("role") == "answer":
            cell.source = code
            return
    raise AssertionError(f"no answer cell for {exercise}")


def test_my_copy_is_made_once_and_never_overwritten(tmp_path):
    mine = tmp_path / "my-work"
    books = sorted(p.name for p in (ROOT / "exercises").glob("*.ipynb"))
    assert {"06_exercises.ipynb", "07_compile_and_control_flow.ipynb"} <= set(books)
    done = mycopy.make_copies(ROOT / "exercises", mine, log=lambda m: None)
    copy_path = mine / "06_exercises.ipynb"
    assert done == [("made", mine / b) for b in books], "a copy of every exercise notebook"
    for b in books:
        made = nbformat.read(mine / b, as_version=4)
        assert made.metadata["graphcourse"]["my_copy"] == {"made_from": f"exercises/{b}"}
        assert made.metadata["graphcourse"]["source"] == b  # the grader recognises it whatever it is named
    nb = nbformat.read(copy_path, as_version=4)
    _answer(nb, "ex01_bucket_picker", "def pick_bucket(b, buckets):\n    return 42  # my answer\n")
    nbformat.write(nb, copy_path)
    before = {b: (mine / b).read_bytes() for b in books}
    assert mycopy.make_copies(ROOT / "exercises", mine, log=lambda m: None) == [("kept", mine / b) for b in books]
    assert {b: (mine / b).read_bytes() for b in books} == before, "an up-to-date copy is not even rewritten"
    done = mycopy.make_copies(ROOT / "exercises", mine, new=True, log=lambda m: None)
    assert done == [("new", mine / b.replace(".ipynb", " (2).ipynb")) for b in books]
    assert {b: (mine / b).read_bytes() for b in books} == before
    assert "my answer" not in (mine / "06_exercises (2).ipynb").read_text()


def test_new_exercises_are_merged_into_my_copy_without_touching_answers(tmp_path):
    """A course update adds an exercise: the learner's copy gains it; every cell already there stays as it was."""
    src, mine = tmp_path / "exercises", tmp_path / "my-work"
    src.mkdir()
    full = nbformat.read(ROOT / "exercises" / "06_exercises.ipynb", as_version=4)
    head, parts, order, tail = mycopy.segments(full)
    assert len(order) >= 2 and tail, "the exercises notebook has exercises and a closing section"
    older = copy.deepcopy(full)
    older.cells = head + [c for ex in order[:-1] for c in parts[ex]] + tail
    nbformat.write(older, src / "06_exercises.ipynb")
    mycopy.make_copies(src, mine, log=lambda m: None)
    copy_path = mine / "06_exercises.ipynb"
    nb = nbformat.read(copy_path, as_version=4)
    _answer(nb, order[0], "# my answer to the first exercise\n")
    nbformat.write(nb, copy_path)
    old_cells = [(c.get("id"), c.source) for c in nb.cells]

    nbformat.write(full, src / "06_exercises.ipynb")  # the course update
    messages = []
    done = mycopy.make_copies(src, mine, log=messages.append)
    assert done == [("updated", copy_path)] and order[-1] in messages[0]
    merged = nbformat.read(copy_path, as_version=4)
    assert mycopy.exercises_in(merged) == order
    kept = [(c.get("id"), c.source) for c in merged.cells if (c.get("id"), c.source) in old_cells]
    assert kept == old_cells, "every earlier cell is still there, in order, unchanged"
    assert "# my answer to the first exercise" in [c.source for c in merged.cells][
        [c.get("id") for c in merged.cells].index(f"{order[0]}-answer")]
    assert merged.cells[-len(tail)].source == tail[0].source, "the new exercise goes before the closing section"
    assert mycopy.make_copies(src, mine, log=lambda m: None) == [("kept", copy_path)]


def test_an_unreadable_copy_is_left_alone(tmp_path):
    mine = tmp_path / "my-work"
    mine.mkdir()
    (mine / "06_exercises.ipynb").write_text("{ not json")
    messages = []
    done = mycopy.make_copies(ROOT / "exercises", mine, log=messages.append)
    assert done[0] == ("unreadable", mine / "06_exercises.ipynb")
    assert all(action == "made" for action, _ in done[1:]), done  # the other notebooks' copies are still made
    assert (mine / "06_exercises.ipynb").read_text() == "{ not json"
    assert "--new" in messages[0]


def test_my_work_is_ignored_by_git():
    result = subprocess.run(["git", "check-ignore", "-q", "my-work/06_exercises.ipynb"], cwd=ROOT)
    assert result.returncode == 0, "my-work/ must be git-ignored, so no pull or update touches it"


def test_gpu_detection_sees_a_native_driver_and_wsl(monkeypatch):
    """An NVIDIA GPU is seen through /proc/driver/nvidia (Linux), WSL's /usr/lib/wsl/lib/nvidia-smi, or nvidia-smi on PATH."""
    import os.path
    import shutil as _shutil

    for present, which, expected in [
        ({"/proc/driver/nvidia"}, None, True),
        ({"/usr/lib/wsl/lib/nvidia-smi"}, None, True),
        (set(), "/usr/bin/nvidia-smi", True),
        (set(), None, False),
    ]:
        monkeypatch.setattr(os.path, "exists", lambda p, present=present: p in present)
        monkeypatch.setattr(_shutil, "which", lambda name, which=which: which)
        assert bootstrap.has_nvidia_gpu() is expected, (present, which)
