"""The class server (classroom/hub/): two learners in a real JupyterHub, in headless Chromium.

One journey, as in a workshop:

1. ``coursehub.py add-users`` creates two learners' Unix accounts (a test group, homes in a
   temporary root) with random passwords;
2. JupyterHub starts from the course's config on 127.0.0.1 (free ports), with its proxy
   (configurable-http-proxy from npm, classroom/hub/node);
3. each learner is refused with the other's password, signs in through the hub's login page in
   their own browser context, gets a JupyterLab of their own (the classmate's server's URL
   answers 403, or 404 while it is not running), opens lesson 01 in their own copy of the
   course, clears its outputs and runs it top to bottom (no cell may end in an error, except
   one tagged raises-exception), then, from inside their kernel,
   checks who they are and what they can read: their own copy (and its toygraph) yes, the other
   learner's home and the model answers (solutions/) no;
4. one learner answers the first exercise with the model answer, the other saves a copy with a
   wrong answer elsewhere in their home;
5. the hub is stopped: no process of it, its proxy or either learner may be left;
6. the instructor's ``python -m graphcourse.grading.collect --group ... --grade`` collects both
   learners' notebooks into one folder and grades them: right answer full marks, wrong answer
   none; no learner's file changed.

Then the accounts, the group and the temporary root are deleted.

Three quick tests of ``graphcourse.grading.collect`` on its own (no hub, no browser) check what it takes
from a home and what it refuses (symlinks, FIFOs, files the learner does not own, the
handed-out notebook, oversized files), that it never writes a learner's file, and never
overwrites an earlier collection.

Needs root (it creates Unix users), JupyterHub (``pip install -e '.[hub]'``), node with the
proxy (``npm ci --prefix classroom/hub/node``) and /usr/bin/chromium with Playwright; skipped
with the reason otherwise. Where the course's Python lives in a folder closed to other users
(e.g. pyenv under /root, mode 700), the hub runs in a private mount namespace in which that
folder is opened to learners (nothing on the machine changes); where that is impossible the
test is skipped and says why. Budget: about 2-4 minutes on a busy 2-core machine.

Run:  .venv/bin/python -m pytest tests/test_hub.py -v
"""

from __future__ import annotations

import contextlib
import csv
import grp
import hashlib
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import browser_support as bs

REPO = bs.REPO
HUB_DIR = REPO / "classroom" / "hub"
COURSEHUB = HUB_DIR / "coursehub.py"
CONFIG = HUB_DIR / "jupyterhub_config.py"
PROXY = HUB_DIR / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
LESSON = "cuda-graphs-course/notebooks/01_the_big_idea.ipynb"
EXERCISES = "cuda-graphs-course/exercises/06_exercises.ipynb"

# Generous limits for a busy 2-core machine; none of them is a performance check.
HUB_START_S = 120
SPAWN_S = 240
RUN_LESSON_S = 420
STOP_S = 90
GRADE_S = 900


def _skip_reason() -> str | None:
    if sys.platform != "linux":
        return "the class server runs learners as Linux users; class server test skipped"
    if os.geteuid() != 0:
        return "the class server test creates Unix users: run it as root (CI does); skipped"
    for tool in ("useradd", "userdel", "groupadd", "groupdel", "chpasswd", "setpriv", "pkill"):
        if shutil.which(tool) is None:
            return f"{tool} not found; class server test skipped"
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        return "jupyterhub is not installed (pip install -e '.[hub]'); class server test skipped"
    if shutil.which("node") is None:
        return "node is not installed (apt-get install nodejs npm); class server test skipped"
    if not PROXY.exists():
        return ("the hub's proxy is not installed (npm ci --prefix classroom/hub/node); "
                "class server test skipped")
    reason = bs.chromium_missing_reason()
    return reason.replace("browser tests", "class server test") if reason else None


REASON = _skip_reason()


# --------------------------------------------------------------------------------------
# Making the course's Python reachable by learners without changing the machine
# --------------------------------------------------------------------------------------


def _probe(prefix: list[str]) -> subprocess.CompletedProcess:
    """Can the unprivileged user nobody run the course's Python (inside prefix's namespace)?
    The uid is dropped in the child before exec, as LocalProcessSpawner does it (setpriv
    running the program itself is not the same test on every kernel)."""
    code = "import jupyterhub, toygraph, graphcourse"
    cmd = [sys.executable, "-c", code]
    if prefix:
        cmd = [*prefix, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
               "--", "sh", "-c", 'exec "$0" "$@"', *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/")
    try:
        return subprocess.run(cmd, user="nobody", group="nogroup", extra_groups=[],
                              capture_output=True, text=True, timeout=120, cwd="/")
    except PermissionError as exc:
        return subprocess.CompletedProcess(cmd, 126, "", str(exc))


def _closed_dir(path: Path) -> Path | None:
    for parent in reversed(Path(path).parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return parent
    return None


def namespace_prefix(root: Path) -> list[str]:
    """[] when learners can run the course's Python as the machine is; else a command prefix
    that runs the hub in a private mount namespace where the closed folder on the way (e.g.
    /root) is a tmpfs holding only the course's Python and repository, bind-mounted back.
    Skips the test when neither works."""
    if _probe([]).returncode == 0:
        return []
    needed = [Path(sys.executable).resolve(), Path(sys.prefix).resolve(), REPO.resolve()]
    closed = {d for d in (_closed_dir(p) for p in needed) if d is not None}
    if len(closed) != 1 or shutil.which("unshare") is None:
        pytest.skip(f"learners cannot run {sys.executable} (closed folders: {sorted(map(str, closed))}) "
                    "and no private mount namespace can open it; class server test skipped")
    blocked = closed.pop()
    keep = sorted({blocked / p.relative_to(blocked).parts[0] for p in needed
                   if p.is_relative_to(blocked)})
    lines = ["set -e"]
    for i, sub in enumerate(keep):
        stage = root / f"stage{i}"
        stage.mkdir()
        lines.append(f"mount --bind '{sub}' '{stage}'")
    lines.append(f"mount -t tmpfs -o mode=755 tmpfs '{blocked}'")
    for i, sub in enumerate(keep):
        stage = root / f"stage{i}"
        lines += [f"mkdir -p '{sub}'", f"mount --bind '{stage}' '{sub}'", f"umount '{stage}'"]
    lines.append('exec "$@"')
    script = root / "namespace.sh"
    script.write_text("\n".join(lines) + "\n")
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", str(script)]
    probe = _probe(prefix)
    if probe.returncode != 0:
        pytest.skip(f"learners cannot run {sys.executable} ({blocked} is closed to other users) and "
                    f"a private mount namespace did not help ({probe.stderr.strip()[-200:]}); "
                    "class server test skipped")
    return prefix


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------


def processes_of(uids: set[int]) -> list[str]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
            uid = int(next(ln for ln in text.splitlines() if ln.startswith("Uid:")).split()[1])
            if uid in uids:
                cmd = (status.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
                found.append(f"{status.parent.name} (uid {uid}): {cmd}")
        except (OSError, StopIteration, ValueError):
            continue
    return found


def rss_mb(uid: int) -> float:
    """Resident memory of every process of uid, in MB (what a learner costs the machine)."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, StopIteration, ValueError, IndexError):
            lines = status.read_text().splitlines()
            if int(next(ln for ln in lines if ln.startswith("Uid:")).split()[1]) == uid:
                total += int(next(ln for ln in lines if ln.startswith("VmRSS:")).split()[1])
    return total / 1024


def alive(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        with contextlib.suppress(OSError):
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z":
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                out.append(f"{pid}: {cmd[:200]}")
    return out


# --------------------------------------------------------------------------------------
# The journey
# --------------------------------------------------------------------------------------

# Runs in a learner's kernel: who am I, what can I read. Prints one JSON line.
_ISOLATION_CODE = """
import getpass, json, os, sys, toygraph
def _try(path, how):
    try:
        os.listdir(path) if how == 'list' else open(path, 'rb').close()
        return 'read'
    except PermissionError:
        return 'denied'
    except OSError as exc:
        return type(exc).__name__
_home = os.path.expanduser('~')
print('ISOLATION ' + json.dumps({
    'user': getpass.getuser(), 'home': _home, 'prefix': os.path.realpath(sys.prefix),
    'toygraph': os.path.realpath(toygraph.__file__),
    'own_lesson': _try(os.path.join(_home, %(lesson)r), 'read'),
    'other_home': _try(%(other_home)r, 'list'),
    'other_lesson': _try(os.path.join(%(other_home)r, %(lesson)r), 'read'),
    'solutions': _try(%(solutions)r, 'read'),
    'near_answers': {p: _try(p, 'read') for p in %(near_answers)r},
}))
"""

# Runs in a learner's kernel: put `source` into the answer cell of `exercise` and save the
# notebook at `dest` (relative to the home).
_ANSWER_CODE = """
import nbformat, os
_src = os.path.expanduser(os.path.join('~', %(exercises)r))
_nb = nbformat.read(_src, as_version=4)
_hit = 0
for _c in _nb.cells:
    _g = _c.metadata.get('graphcourse', {})
    if _g.get('role') == 'answer' and _g.get('exercise') == %(exercise)r:
        _c.source = %(source)r
        _hit += 1
_dest = os.path.expanduser(os.path.join('~', %(dest)r))
os.makedirs(os.path.dirname(_dest), exist_ok=True)
nbformat.write(_nb, _dest)
print('ANSWERED', _hit, _dest)
"""

_JS_EXECUTE = """async (code) => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session.kernel;
  let out = '';
  const future = kernel.requestExecute({code, store_history: false});
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === 'stream') out += msg.content.text;
    if (msg.header.msg_type === 'error') out += 'ERROR ' + msg.content.ename + ': ' + msg.content.evalue;
  };
  await future.done;
  return out;
}"""


def first_exercise() -> tuple[str, str, str]:
    """(exercise id, model answer source, handed-out stub source) of the first exercise."""
    def answers(path):
        nb = json.loads(path.read_text())
        out = {}
        for c in nb["cells"]:
            g = c.get("metadata", {}).get("graphcourse", {})
            if g.get("role") == "answer":
                out[g["exercise"]] = "".join(c["source"])
        return out
    model = answers(REPO / "solutions" / "06_exercises.ipynb")
    stub = answers(REPO / "exercises" / "06_exercises.ipynb")
    ex = sorted(stub)[0]
    return ex, model[ex], stub[ex]


def expected_errors(notebook: Path) -> set[int]:
    """Indexes of the cells tagged raises-exception (the lesson shows that error on purpose)."""
    cells = json.loads(notebook.read_text())["cells"]
    return {i for i, c in enumerate(cells) if "raises-exception" in c.get("metadata", {}).get("tags", [])}


def run_in_kernel(nb: bs.NotebookPage, code: str) -> str:
    nb.wait_kernel_idle()
    return nb.page.evaluate(_JS_EXECUTE, code)


def learner_journey(browser, base: str, name: str, password: str, home: Path, other_home: Path,
                    answer: tuple[str, str], dest: str, shots: Path, wrong_password: str,
                    refused: dict) -> dict:
    """Sign in, run lesson 01 in the learner's own copy, check isolation, save an answer."""
    context = bs.new_context(browser)
    page = context.new_page()
    try:
        t0 = time.monotonic()
        page.goto(f"{base}/hub/login", timeout=bs.PAGE_LOAD_S * 1000)
        # a classmate's password does not open this learner's account
        page.fill("#username_input", name)
        page.fill("#password_input", wrong_password)
        page.click("#login_submit")
        error = page.locator(".login_error")
        error.wait_for(timeout=bs.PAGE_LOAD_S * 1000)  # JupyterHub's "Invalid username or password."
        assert "/hub/login" in page.url and "invalid" in error.inner_text().lower(), (
            f"{name}: a wrong password led to {page.url}: {error.inner_text()!r}")
        page.fill("#username_input", name)
        page.fill("#password_input", password)
        page.click("#login_submit")
        page.wait_for_url(f"**/user/{name}/lab**", timeout=SPAWN_S * 1000)
        spawned = time.monotonic() - t0
        # the classmate's JupyterLab (running when the second learner signs in) stays closed
        other = other_home.name
        response = page.goto(f"{base}/user/{other}/lab", timeout=bs.PAGE_LOAD_S * 1000)
        page.wait_for_load_state()
        text = page.locator("body").inner_text(timeout=30_000)
        status = response.status if response is not None else None
        assert status in (403, 404) and not page.evaluate("() => !!window.jupyterapp"), (
            f"{name} opened {other}'s server: {page.url} ({status}) {text[:300]!r}")
        refused[name] = (status, text.splitlines()[2][:80] if text.count("\n") > 2 else text[:80])
        nb = bs.NotebookPage(page=page, path=LESSON)
        nb.open(f"{base}/user/{name}/lab/tree/{LESSON}?reset")
        nb.wait_kernel_idle(limit_s=SPAWN_S)
        # a learner's copy is stored executed: clear it, so every output below is this run's
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        cleared = nb.state()
        assert all(c["count"] is None for c in cleared["cells"]), cleared
        state = nb.run_all(limit_s=RUN_LESSON_S)
        ran = time.monotonic() - t0
        # an error is allowed only where the lesson shows one on purpose (tag raises-exception)
        meant = expected_errors(home / LESSON)
        errors = [e for c in state["cells"] if c["index"] not in meant for e in c["errors"]]
        not_run = [c["index"] for c in state["cells"] if c["count"] is None]
        assert state["cells"], f"{name}: lesson 01 has no code cells in the page"
        assert not errors, f"{name}: lesson 01 ends in errors: {errors}"
        assert not not_run, f"{name}: cells never ran in lesson 01: {not_run}"
        assert not nb.dialogs, f"{name}: unexpected dialogs: {nb.dialogs}"

        out = run_in_kernel(nb, _ISOLATION_CODE % {
            "lesson": LESSON, "other_home": str(other_home),
            "solutions": str(REPO / "solutions" / "06_exercises.ipynb"),
            "near_answers": [str(REPO / "tests" / "test_browser.py"), str(REPO / "docs" / "instructor" / "lessons.md"),
                             str(next((REPO / "tests" / "wrong_answers").rglob("*.py")))]})
        line = next((ln for ln in out.splitlines() if ln.startswith("ISOLATION ")), None)
        assert line, f"{name}: the isolation check printed {out!r}"
        seen = json.loads(line.removeprefix("ISOLATION "))

        exercise, source = answer
        saved = run_in_kernel(nb, _ANSWER_CODE % {
            "exercises": EXERCISES, "exercise": exercise, "source": source, "dest": dest})
        assert saved.startswith("ANSWERED 1 "), f"{name}: saving the answer printed {saved!r}"
        return {"seen": seen, "cells": len(state["cells"]), "dest": dest,
                "timings": {"signed in and spawned": round(spawned, 1), "lesson run": round(ran, 1)}}
    except BaseException:
        with contextlib.suppress(Exception):
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / f"{name}-failure.png"), full_page=True)
        raise
    finally:
        with contextlib.suppress(Exception):
            context.close()


def wait_for_hub(base: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + HUB_START_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"JupyterHub exited with code {proc.returncode} while starting:\n"
                        + log.read_text(errors="replace")[-4000:])
        with contextlib.suppress(urllib.error.URLError, ConnectionError, OSError, ValueError):
            with urllib.request.urlopen(f"{base}/hub/api/", timeout=5) as resp:
                if "version" in json.loads(resp.read()):
                    return
        if time.monotonic() > deadline:
            pytest.fail(f"JupyterHub did not answer within {HUB_START_S}s:\n"
                        + log.read_text(errors="replace")[-4000:])
        time.sleep(0.5)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the hub (it stops the learners' servers and its proxy); SIGKILL after STOP_S."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def snapshot(homes: list[Path]) -> dict[str, tuple[str, int]]:
    out = {}
    for home in homes:
        for path in sorted(home.rglob("*")):
            if path.is_file() and not path.is_symlink():
                out[str(path)] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    return out


@pytest.mark.browser
@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_class_server_two_learners(tmp_path):
    t_start = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="course-hub-test-"))
    root.chmod(0o755)  # learners must reach their homes below it
    tag = secrets.token_hex(3)
    group = f"cgt{tag}"
    names = [f"ada{tag}", f"bob{tag}"]  # ada answers right in place, bob wrong in a copy
    homes_root, state, collected = root / "homes", root / "state", root / "class"
    homes_root.mkdir(mode=0o755)
    private = [p for p in (REPO / "solutions", REPO / ".git", REPO / "tests", REPO / "docs" / "instructor", REPO / "build")
               if p.is_dir() and not p.is_symlink()]
    modes = {p: stat.S_IMODE(os.stat(p).st_mode) for p in private}
    env = dict(os.environ, COURSE_HUB_ROOT=str(state), COURSE_HUB_GROUP=group, COURSE_HUB_IP="127.0.0.1",
               COURSE_HUB_PORT=str(bs.free_port()), COURSE_HUB_HUB_PORT=str(bs.free_port()),
               COURSE_HUB_PROXY_API_PORT=str(bs.free_port()), PYTHONPATH=str(REPO))
    base = f"http://127.0.0.1:{env['COURSE_HUB_PORT']}"
    proc = None
    log_path = root / "hub.log"
    uids: set[int] = set()
    try:
        made = subprocess.run(
            [sys.executable, str(COURSEHUB), "add-users", "--group", group, "--home-root", str(homes_root),
             *names], env=env, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stdout + made.stderr
        import pwd
        uids = {pwd.getpwnam(n).pw_uid for n in names}
        with open(state / "passwords.csv", newline="") as f:
            passwords = {row["user"]: row["password"] for row in csv.DictReader(f)}
        assert sorted(passwords) == sorted(names)
        assert stat.S_IMODE(os.stat(state / "passwords.csv").st_mode) == 0o600
        homes = {n: Path(pwd.getpwnam(n).pw_dir) for n in names}
        for home in homes.values():
            assert stat.S_IMODE(os.stat(home).st_mode) == 0o700

        # test-only JupyterLab setting: window.jupyterapp, read by browser_support.NotebookPage
        jconf = root / "jupyter-test-config"
        jconf.mkdir(mode=0o755)
        (jconf / "jupyter_server_config.json").write_text(
            json.dumps({"LabApp": {"expose_app_in_browser": True}}))
        (jconf / "jupyter_server_config.json").chmod(0o644)
        test_config = root / "test_config.py"
        test_config.write_text(textwrap.dedent(f"""\
            c = get_config()
            load_subconfig({str(CONFIG)!r})
            c.Spawner.environment = {{"JUPYTER_CONFIG_PATH": {str(jconf)!r}}}
        """))

        prefix = namespace_prefix(root)
        log = open(log_path, "wb")
        proc = subprocess.Popen([*prefix, sys.executable, "-m", "jupyterhub", "-f", str(test_config)],
                                cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for_hub(base, proc, log_path)
        for p in private:  # the hub closed the model answers to learners
            assert not os.stat(p).st_mode & 0o077, f"{p} is still open to learners"

        exercise, model, stub = first_exercise()
        work = {names[0]: (names[1], model, EXERCISES),
                names[1]: (names[0], stub + "\n# I could not do it\n", "my-work/06_exercises.ipynb")}
        reports, refused = {}, {}
        with bs.chromium_browser() as browser:
            for name, (other, source, dest) in work.items():
                reports[name] = learner_journey(
                    browser, base, name, passwords[name], homes[name], homes[other],
                    (exercise, source), dest, tmp_path / "shots", wrong_password=passwords[other],
                    refused=refused)
        for name, report in reports.items():
            seen, home = report["seen"], homes[name]
            assert seen["user"] == name and Path(seen["home"]) == home, seen
            assert seen["prefix"] == str(Path(sys.prefix).resolve()), (
                f"{name}'s kernel runs from {seen['prefix']}, not the course's environment {sys.prefix}")
            assert Path(seen["toygraph"]).is_relative_to(home / "cuda-graphs-course"), (
                f"{name} imports toygraph from {seen['toygraph']}, not from their own copy")
            assert seen["own_lesson"] == "read", seen
            assert seen["other_home"] == "denied" and seen["other_lesson"] == "denied", (
                f"{name} can read the other learner's files: {seen}")
            assert seen["solutions"] == "denied", f"{name} can read the model answers: {seen}"
            assert set(seen["near_answers"].values()) == {"denied"}, (
                f"{name} can read tests or the instructor kit (near-answers): {seen['near_answers']}")
            # the learner's copy is the release, with their own my-work/ and the course's Makefile (make check there)
            course = home / "cuda-graphs-course"
            assert (course / "my-work" / "06_exercises.ipynb").is_file() and (course / "Makefile").is_file()
            assert "authored only" not in (course / "README.md").read_text(), "the authored README, not the release's"
        # a learner's `make check` in a terminal of theirs: the course's environment (VENV, as their server sets it),
        # nothing installed, each check named
        name = names[0]
        course, entry = homes[name] / "cuda-graphs-course", pwd.getpwnam(name)
        checked = subprocess.run(  # in the hub's mount namespace (the course's Python opened to learners), as them
            [*prefix, "setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups",
             "make", "-C", str(course), "check", "NB=my-work/06_exercises.ipynb"],
            cwd=course, capture_output=True, text=True, timeout=GRADE_S, stdin=subprocess.DEVNULL,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(homes[name]), "LANG": "C.UTF-8",
                 "VENV": sys.prefix, "PYTHONPATH": str(course)})
        said = checked.stdout + checked.stderr
        assert "Installing" not in said and "ex01" in said and ("passed" in said or "failed" in said), said[-3000:]

        # 5. stop everything: the hub takes its proxy and both learners' servers and kernels down
        memory = {n: round(rss_mb(pwd.getpwnam(n).pw_uid)) for n in names}
        hub_tree = [proc.pid, *bs._descendants(proc.pid)]
        assert processes_of(uids), "no learner process ran while the hub was up?"
        stop(proc)
        # processes take a moment to exit on a busy machine: wait for them (a grace period, not a time limit
        # the test is about), then none may be left
        grace = time.monotonic() + 60
        left = alive(hub_tree) + processes_of(uids)
        while left and time.monotonic() < grace:
            time.sleep(0.5)
            left = alive(hub_tree) + processes_of(uids)
        assert not left, "processes left after the hub stopped:\n" + "\n".join(left)

        # 6. the instructor collects and grades; the learners' files stay as they were
        before = snapshot(list(homes.values()))
        graded = subprocess.run(
            [sys.executable, "-m", "graphcourse.grading.collect", "--group", group, "--out", str(collected),
             "--grade", "--quiet"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=GRADE_S)
        assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
        assert snapshot(list(homes.values())) == before, "collecting or grading changed a learner's file"
        manifest = json.loads((collected / "collected.json").read_text())
        a, b = names
        assert [f["from"] for f in manifest["learners"][a]["files"]] == [EXERCISES]
        assert [f["from"] for f in manifest["learners"][b]["files"]] == ["my-work/06_exercises.ipynb"]
        assert {"path": EXERCISES, "why": "identical to the handed-out notebook"} \
            in manifest["learners"][b]["skipped"]
        report = json.loads((collected / "grades.json").read_text())
        assert report["format"] == "graphcourse-grades/2", sorted(report)
        grades = report["learners"]
        assert set(grades) == {a, b}, f"graded {sorted(grades)}; output:\n{graded.stdout[-2000:]}"
        # each answered one exercise only: the others earn nothing (unanswered or an error), and
        # are not what this journey checks; the answered exercise is graded on its own
        right, wrong = grades[a]["exercises"][exercise], grades[b]["exercises"][exercise]
        for learner in (a, b):  # the untouched copies of the other exercise notebooks were not collected
            books = grades[learner]["notebooks"]
            assert books["06_exercises.ipynb"]["status"] == "graded", books
            assert all(v["status"] == "not-handed-in" for k, v in books.items() if k != "06_exercises.ipynb"), books
        assert right["points"] > 0 and right["points"] + right.get("open", 0) == right["max"], right
        assert wrong["points"] == 0, wrong
        with open(collected / "grades.csv", newline="") as f:
            assert {a, b} <= {row[0] for row in csv.reader(f)}
        print(f"class server journey: {json.dumps({n: r['timings'] for n, r in reports.items()})}; "
              f"learners' resident memory after lesson 01 (MB): {memory}; "
              f"a classmate's server answered {refused}; "
              f"total {time.monotonic() - t_start:.0f}s")
    finally:
        if proc is not None:
            stop(proc)
            log.close()
        with contextlib.suppress(Exception):
            for leftover in processes_of(uids):
                os.kill(int(leftover.split()[0]), signal.SIGKILL)
        for name in names:
            subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)
        for p, mode in modes.items():
            with contextlib.suppress(OSError):
                os.chmod(p, mode)
        if log_path.exists():
            shutil.copy(log_path, tmp_path / "hub.log")  # kept with pytest's temporary files
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------------------
# graphcourse.grading.collect on its own: what it takes from a home, and what it refuses
# --------------------------------------------------------------------------------------

from graphcourse.grading import collect as gc  # noqa: E402


def _exercise_nb(answer: str) -> str:
    nb = json.loads((REPO / "exercises" / "06_exercises.ipynb").read_text())
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("graphcourse", {}).get("role") == "answer":
            cell["source"] = answer
            break
    return json.dumps(nb)


def _state(home: Path) -> dict:
    return {str(p): (p.read_bytes(), p.lstat().st_mtime_ns) for p in sorted(home.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def test_collect_takes_only_the_learners_own_exercise_notebooks(tmp_path):
    homes = tmp_path / "homes"
    ada, bob = homes / "ada", homes / "bob"
    (ada / "cuda-graphs-course" / "exercises").mkdir(parents=True)
    (ada / "cuda-graphs-course" / "notebooks").mkdir(parents=True)
    (bob / "cuda-graphs-course" / "exercises").mkdir(parents=True)
    answered = ada / "cuda-graphs-course" / "exercises" / "06_exercises.ipynb"
    answered.write_text(_exercise_nb("x = 1  # ada's answer"))
    os.utime(answered, (1_700_000_000, 1_700_000_000))
    renamed = ada / "my copy?.ipynb"
    renamed.write_text(_exercise_nb("x = 2  # ada's second try"))
    shutil.copy(REPO / "notebooks" / "01_the_big_idea.ipynb", ada / "cuda-graphs-course" / "notebooks")
    (ada / ".ipynb_checkpoints").mkdir()
    (ada / ".ipynb_checkpoints" / "06_exercises-checkpoint.ipynb").write_text(_exercise_nb("old"))
    # a damaged exercise notebook is collected (the grader says it cannot read it)
    (ada / "broken.ipynb").write_text(_exercise_nb("x = 0")[:2000])
    (ada / "notes.ipynb").write_text("not json at all")
    bobs = bob / "cuda-graphs-course" / "exercises" / "06_exercises.ipynb"
    bobs.write_text(_exercise_nb("x = 3  # bob's answer"))
    (ada / "stolen.ipynb").symlink_to(bobs)  # a link to a classmate's work is not followed
    (ada / "linked").symlink_to(bob / "cuda-graphs-course", target_is_directory=True)
    os.mkfifo(ada / "pipe.ipynb")  # would block a naive reader
    shutil.copy(REPO / "exercises" / "06_exercises.ipynb", ada / "handed-out.ipynb")
    (ada / "huge.ipynb").write_text(_exercise_nb("y = '" + "z" * 300_000 + "'"))
    before = _state(homes)

    out = tmp_path / "class"
    learners = gc.from_homes(homes)
    assert [lr.name for lr in learners] == ["ada", "bob"]
    manifest = gc.collect(learners, out, max_mb=0.25)
    files = {lr: [(f["from"], f["to"]) for f in e["files"]] for lr, e in manifest["learners"].items()}
    assert sorted(files["ada"]) == [("broken.ipynb", "ada/broken.ipynb"),
                            ("cuda-graphs-course/exercises/06_exercises.ipynb", "ada/06_exercises.ipynb"),
                            ("my copy?.ipynb", "ada/my copy_.ipynb")]
    assert files["bob"] == [("cuda-graphs-course/exercises/06_exercises.ipynb", "bob/06_exercises.ipynb")]
    skipped = {s["path"]: s["why"] for s in manifest["learners"]["ada"]["skipped"]}
    assert skipped["stolen.ipynb"] == "a symlink (not followed)"
    assert skipped["pipe.ipynb"] == "not a regular file"
    assert skipped["handed-out.ipynb"] == "identical to the handed-out notebook"
    assert "limit" in skipped["huge.ipynb"]
    assert skipped["notes.ipynb"] == "not a readable notebook"
    assert not any("checkpoint" in p or p.startswith("linked") for p in skipped)
    assert (out / "ada" / "06_exercises.ipynb").read_bytes() == answered.read_bytes()
    assert (out / "ada" / "06_exercises.ipynb").stat().st_mtime == 1_700_000_000  # newest copy wins
    assert json.loads((out / "collected.json").read_text()) == manifest
    assert _state(homes) == before, "collect changed a learner's file"
    assert "nothing to grade" not in gc.summary(manifest)

    with pytest.raises(gc.CollectError, match="never overwritten"):
        gc.collect(learners, out)  # an earlier collection stays as it is


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_collect_refuses_a_file_the_learner_does_not_own(tmp_path):
    home = tmp_path / "ada"
    home.mkdir()
    (home / "mine.ipynb").write_text(_exercise_nb("x = 1"))
    planted = home / "planted.ipynb"  # e.g. a hard link to a classmate's notebook
    planted.write_text(_exercise_nb("x = 2"))
    os.chown(planted, 54321, 54321)
    learner = gc.Learner("ada", home, uid=os.getuid())
    gc.collect([learner], tmp_path / "out")
    assert [f["from"] for f in learner.files] == ["mine.ipynb"]
    assert learner.skipped == [{"path": "planted.ipynb", "why": "owned by uid 54321, not by the learner"}]


def test_collect_cli_says_what_is_wrong(tmp_path, capsys):
    assert gc.main(["--users", "no-such-learner-here", "--out", str(tmp_path / "o")]) == 2
    assert "no user 'no-such-learner-here'" in capsys.readouterr().err
    assert gc.main(["--group", "no-such-group-here", "--out", str(tmp_path / "o")]) == 2
    assert "--group" in capsys.readouterr().err
    (tmp_path / "homes" / "ada").mkdir(parents=True)
    assert gc.main(["--homes", str(tmp_path / "homes"), "--out", str(tmp_path / "o"), "--grade"]) == 0
    out = capsys.readouterr().out
    assert "ada" in out and "nothing to grade" in out


def test_grade_class_writes_every_output_in_one_run_with_everyone_in_it(tmp_path, course_process, capsys):
    """make grade-class's collect --grade: one grading run writes the JSON, the CSV, JUnit, the feedback pages with
    their index and the Gradescope files; a learner who handed in nothing is in each, "not handed in"; the output
    folders inside the class folder are not taken for learners."""
    homes = tmp_path / "homes"
    (homes / "ada" / "cuda-graphs-course" / "my-work").mkdir(parents=True)
    (homes / "ada" / "cuda-graphs-course" / "my-work" / "06_exercises.ipynb").write_text(_exercise_nb("x = 1  # ada"))
    (homes / "linus").mkdir()
    out = tmp_path / "class"
    assert gc.main(["--homes", str(homes), "--out", str(out), "--grade", "--quiet", "--timeout-per-cell", "60"]) == 0
    said = capsys.readouterr().out
    assert "1 notebook(s) from 1 of 2 learner(s)" in said, said
    report = json.loads((out / "grades.json").read_text())
    assert set(report["learners"]) == {"ada", "linus"}, sorted(report["learners"])
    assert report["learners"]["linus"]["status"] == "not-handed-in", report["learners"]["linus"]
    assert not report.get("skipped"), report.get("skipped")
    with open(out / "grades.csv", newline="") as f:
        assert {"ada", "linus"} <= {row[0] for row in csv.reader(f)}
    assert "linus" in (out / "grades.xml").read_text() and "ada" in (out / "grades.xml").read_text()
    index = (out / gc.FEEDBACK / "index.html").read_text()
    assert "ada" in index and "linus" in index
    assert sorted(p.suffix for p in (out / gc.FEEDBACK).iterdir()) == [".html"] * 3
    assert len(list((out / gc.GRADESCOPE).glob("*.json"))) == 2
    assert (out / gc.ROSTER).read_text().splitlines()[1:] == ["ada", "linus"]


# --------------------------------------------------------------------------------------
# coursehub: the learner's copy of the course
# --------------------------------------------------------------------------------------


def _coursehub():
    import importlib.util

    spec = importlib.util.spec_from_file_location("coursehub", COURSEHUB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_learner_copy_adds_only_what_is_missing_and_never_the_answers(tmp_path):
    ch = _coursehub()
    home = tmp_path / "ada"
    home.mkdir()
    copy, added = ch.make_learner_copy(home)
    assert copy == home / "cuda-graphs-course"
    from graphcourse.authoring import release

    course = set(release.course_files(REPO))
    for rel in ("notebooks/01_the_big_idea.ipynb", "exercises/06_exercises.ipynb",
                "toygraph/__init__.py", "graphcourse/__init__.py", "Makefile", "pyproject.toml"):
        assert (copy / rel).read_bytes() == release.released_bytes(REPO, rel, course), rel
    assert b"[Contents](../README.md)" in (copy / "notebooks" / "01_the_big_idea.ipynb").read_bytes(), "dressed"
    # the learner's README: the release's, without the passages about grading a class and maintaining the course
    assert "authored only" in (REPO / "README.md").read_text()
    assert (copy / "README.md").read_text() and "authored only" not in (copy / "README.md").read_text()
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()) == sorted(
        r for r in release.course_files(REPO) if "__pycache__" not in r)
    # the Makefile finds the course's environment up to date (the course's times, not the copy's)
    assert (copy / "pyproject.toml").stat().st_mtime_ns == (REPO / "pyproject.toml").stat().st_mtime_ns
    assert not (copy / "solutions").exists() and not (copy / "tests").exists()
    assert not list(copy.rglob("__pycache__")) and not (copy / "docs" / "instructor").exists()
    assert len(added) == sum(1 for p in copy.rglob("*") if p.is_file())

    # the learner's work survives a restart; a deleted file comes back; nothing else is added
    mine = copy / "exercises" / "06_exercises.ipynb"
    mine.write_text("my answers")
    (copy / "notebooks" / "01_the_big_idea.ipynb").unlink()
    (copy / "toygraph").rename(copy / "toygraph-mine")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (copy / "toygraph").symlink_to(elsewhere, target_is_directory=True)  # a learner's own link
    again, added = ch.make_learner_copy(home)
    assert mine.read_text() == "my answers"
    assert [Path(p).relative_to(copy).as_posix() for p in added] == ["notebooks/01_the_big_idea.ipynb"]
    assert (copy / "toygraph").is_symlink() and not any(elsewhere.iterdir()), "wrote through a link"

    bob = tmp_path / "bob"
    bob.mkdir()
    (bob / "cuda-graphs-course").write_text("a file where the copy goes")
    with pytest.raises(ch.HubSetupError, match="not a folder: rename it"):
        ch.make_learner_copy(bob)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("groupdel") is None,
                    reason="creates Unix users: needs root, useradd and groupdel (CI has them)")
def test_remove_users_leaves_no_account_and_no_group_behind(tmp_path):
    ch = _coursehub()
    group, names = "cgt-rm-test", ["cgtrma", "cgtrmb"]
    try:
        ch.add_users(names, group=group, homes=tmp_path / "homes", sheet=tmp_path / "sheet.csv")
        assert set(ch.learners(group)) == set(names)
        sheet = tmp_path / "sheet.csv"
        ch.remove_users(names[:1], group=group, sheet=sheet)
        grp.getgrnam(group)  # one learner is left: the group stays
        assert [r.split(",")[0] for r in sheet.read_text().splitlines()] == ["user", names[1]], "a removed password kept"
        assert sheet.stat().st_mode & 0o777 == 0o600
        ch.remove_users(names[1:], group=group, delete_homes=True, sheet=sheet)
        assert sheet.read_text().splitlines() == ["user,password"]
        with pytest.raises(KeyError):
            grp.getgrnam(group)
        for name in names:
            with pytest.raises(KeyError):
                pwd.getpwnam(name)
    finally:
        for name in names:
            subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)


def test_add_users_refuses_unusable_names(tmp_path):
    ch = _coursehub()
    if os.geteuid() != 0:
        with pytest.raises(ch.HubSetupError, match="run it as root"):
            ch.add_users(["ada"], group="g", homes=tmp_path)
        return
    with pytest.raises(ch.HubSetupError, match="not a usable user name: 'Ada', '../x'"):
        ch.add_users(["Ada", "../x", "ok"], group="cgt-never-made", homes=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing created before the names were checked


def test_the_learners_jupyterlab_never_asks_about_news(tmp_path):
    """JupyterLab asks for news consent unless fetchNews is decided: the class server's Jupyter config points
    JupyterLab at the course's settings overrides, which decide it (as `make lab` does)."""
    from traitlets.config.loader import PyFileConfigLoader

    here = REPO / "classroom" / "hub" / "jupyter-config"
    config = PyFileConfigLoader("jupyter_server_config.py", path=str(here)).load_config()
    settings = Path(config.LabApp.app_settings_dir)
    assert settings == REPO / "graphcourse" / "lab_settings"
    overrides = json.loads((settings / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    assert json.loads((here / "jupyter_server_config.json").read_text())["LabApp"]["news_url"] is None
