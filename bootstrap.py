#!/usr/bin/env python3
"""Set the course up and open it, with Python alone: what `make` does, where `make` is missing.

    python3 bootstrap.py lab            # set up .venv/, make your exercises copy, open JupyterLab
    python3 bootstrap.py test           # set up .venv/, then run every test
    python3 bootstrap.py setup          # only set up .venv/ (with the test tools)
    python3 bootstrap.py setup-lab      # only set up .venv/ for learning (no test tools)
    python3 bootstrap.py wheelhouse     # download every wheel the course needs into wheelhouse/
    python3 bootstrap.py my-exercises   # make (or update) your own copy in my-work/
    python3 bootstrap.py update         # git pull the course's update, keeping your changed lessons

The Makefile calls this script for its set-up, so `make lab` and `python3 bootstrap.py lab`
do the same. Options: --port N, --venv DIR, --torch "SPEC [pip options]", --wheelhouse DIR
(or the environment variables PORT, VENV, TORCH, WHEELHOUSE). Standard library only, and
written so that an old Python can still read it far enough to say it is too old.

Which torch: a torch already in the environment is kept. Otherwise, on Linux (and WSL)
without an NVIDIA GPU (no nvidia-smi, no /proc/driver/nvidia), the small CPU build from
PyTorch's CPU wheel index; with a GPU, or on macOS and Windows, the default build from PyPI
(CUDA on Linux). With a wheelhouse/ folder (see `wheelhouse`), everything installs from it
and nothing is downloaded.
"""

from __future__ import print_function

import os
import platform
import shutil
import socket
import subprocess
import sys

MIN_PYTHON = (3, 11)
ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TORCH = "torch==2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
DEFAULT_PORT = 8888
FIRST_PAGE = "notebooks/00_setup_check.ipynb"
RELEASE_MANIFEST = "release.json"  # a folder holding it is a built release (graphcourse.authoring.release)
# JupyterLab defaults for the course (overrides.json): the README and other markdown open
# rendered, so a lesson's "Contents" link shows the course index with working links; closing a
# lesson's tab shuts its kernel down. Its jupyter_server_config.py shuts down kernels idle an hour.
LAB_SETTINGS_DIR = os.path.join(ROOT, "graphcourse", "lab_settings")
STAMP = ".course-installed"          # everything: the course, its tools and the test tools
LAB_STAMP = ".course-installed-lab"  # what a learner needs: the course and its tools


def say(message):
    print(message)
    sys.stdout.flush()


def fail(message, code=2):
    sys.stderr.write("error: " + message + "\n")
    sys.exit(code)


def check_python(python_version=None):
    """Stop with a clear message on a Python older than the course needs."""
    version = python_version or sys.version_info[:3]
    if tuple(version[:2]) < MIN_PYTHON:
        fail("this course needs Python %d.%d or newer; this is Python %s (%s).\n"
             "  Install a newer Python (python.org, your package manager, pyenv or conda), then run\n"
             "  make lab PYTHON=python3.12   or   python3.12 bootstrap.py lab"
             % (MIN_PYTHON + (".".join(str(v) for v in version), sys.executable)))


def venv_python(venv):
    """The Python inside a virtual environment (bin/ on Linux and macOS, Scripts\\ on Windows)."""
    if os.name == "nt":
        return os.path.join(venv, "Scripts", "python.exe")
    return os.path.join(venv, "bin", "python")


def has_nvidia_gpu():
    """True where an NVIDIA driver is visible: nvidia-smi on PATH (also WSL's), or /proc/driver/nvidia."""
    if os.path.exists("/proc/driver/nvidia") or os.path.exists("/usr/lib/wsl/lib/nvidia-smi"):
        return True
    return shutil.which("nvidia-smi") is not None


def is_wsl():
    try:
        with open("/proc/version") as f:
            return "microsoft" in f.read().lower()
    except OSError:
        return False


def reachable(url, timeout=5.0):
    """Whether an index answers at all (a room without network, or a closed network, does not)."""
    try:
        from urllib.request import urlopen
        with urlopen(url + "/", timeout=timeout) as response:
            return response.status < 500
    except Exception:
        return False


def wheelhouse_dir(given=None):
    """The wheelhouse to install from: the one given, or ./wheelhouse when it holds wheels; else None."""
    path = given or os.environ.get("WHEELHOUSE") or os.path.join(ROOT, "wheelhouse")
    path = os.path.abspath(path)
    if os.path.isdir(path) and any(n.endswith(".whl") for n in os.listdir(path)):
        return path
    if given:
        fail("the wheelhouse %s holds no wheels. Build it on a machine with network: make wheelhouse" % path)
    return None


def torch_choice(torch_spec=None, gpu=None, system=None, cpu_index_reachable=None):
    """The pip arguments that install torch here, and a sentence saying why.

    An explicit spec (TORCH=...) is used as given. Otherwise: Linux without an NVIDIA GPU gets
    the CPU build from PyTorch's CPU index (when that index answers); a GPU machine, macOS and
    Windows get PyPI's default build for the pinned version.
    """
    if torch_spec:
        return torch_spec.split(), "torch as asked (TORCH=%s)" % torch_spec
    gpu = has_nvidia_gpu() if gpu is None else gpu
    system = system or platform.system()
    if system == "Linux" and not gpu:
        if cpu_index_reachable is None:
            cpu_index_reachable = reachable(CPU_INDEX)
        if cpu_index_reachable:
            return ([DEFAULT_TORCH, "--index-url", CPU_INDEX],
                    "the CPU build of %s (no NVIDIA GPU found%s: about 200 MB instead of several GB)"
                    % (DEFAULT_TORCH, " in WSL" if is_wsl() else ""))
        return ([DEFAULT_TORCH],
                "%s from your default index: no NVIDIA GPU found, but PyTorch's CPU index (%s) does not "
                "answer, so pip takes what your index offers (on plain PyPI that is the large CUDA build; "
                "a wheelhouse avoids this: make wheelhouse)" % (DEFAULT_TORCH, CPU_INDEX))
    if gpu:
        return [DEFAULT_TORCH], "%s with CUDA (an NVIDIA GPU is here)" % DEFAULT_TORCH
    return [DEFAULT_TORCH], "%s (PyPI's build for %s)" % (DEFAULT_TORCH, system)


LOCK = os.path.join(ROOT, "requirements.lock")
"""Exact versions of every package `make test` installs but torch (`python3 bootstrap.py lock` writes it from a
set-up environment): `make lab` and `make test` install with it as pip constraints, so stored outputs and strict
nbval see the versions they were made with. torch itself is DEFAULT_TORCH, its build chosen per machine."""


def lock_args():
    return ["-c", LOCK] if os.path.exists(LOCK) else []


def write_lock(python):
    """requirements.lock from the environment's installed packages (not the course itself; torch without +cpu)."""
    out = subprocess.run([python, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True,
                         cwd=ROOT)
    if out.returncode != 0:
        fail("pip freeze failed: " + out.stderr.strip()[-500:])
    machine_specific = ("torch==", "triton==", "nvidia-", "cuda-")  # torch is chosen per machine (DEFAULT_TORCH)
    pins = sorted({line.split("+")[0].strip() for line in out.stdout.splitlines()
                   if "==" in line and not line.startswith(("-e", "#")) and not line.lower().startswith(machine_specific)},
                  key=str.lower)
    with open(LOCK, "w") as f:
        f.write("# The exact versions `make lab` and `make test` install (pip constraints), torch apart (its build is\n"
                "# chosen per machine). Written by `python3 bootstrap.py lock` (make lock) from a `make test`\n"
                "# environment (Linux, Python %d.%d); regenerate it after changing pyproject.toml's dependencies.\n"
                "# environment.yml is checked against it by tests/test_lock.py.\n" % sys.version_info[:2])
        f.write("\n".join(pins) + "\n")
    say("wrote %s: %d packages" % (os.path.relpath(LOCK, ROOT), len(pins)))


def pip(python, args, quiet=True, locked=True):
    """pip install args, with the lock's versions as constraints; if they cannot be installed here (another
    platform or Python without those wheels), say so and install what pyproject.toml allows instead."""
    cmd = [python, "-m", "pip", "install"] + (["-q"] if quiet else []) + list(args)
    if locked and lock_args():
        if subprocess.call(cmd + lock_args(), cwd=ROOT) == 0:
            return
        say("The locked versions (requirements.lock) do not install here; installing the newest versions "
            "pyproject.toml allows instead. Lessons still run; a stored output may differ slightly.")
    code = subprocess.call(cmd, cwd=ROOT)
    if code != 0:
        fail("pip failed (exit %d) running: %s\n  Read pip's message above; with no network, build a "
             "wheelhouse on a machine that has one (make wheelhouse) and copy it here." % (code, " ".join(cmd)))


def _fresh(venv, name):
    stamp = os.path.join(venv, name)
    sources = [os.path.join(ROOT, n) for n in ("pyproject.toml", "requirements.lock") if os.path.exists(os.path.join(ROOT, n))]
    return os.path.exists(stamp) and all(os.path.getmtime(stamp) >= os.path.getmtime(s) for s in sources)


# The extras `make test` installs: the test tools, and what the class-server, site, browser-build and
# many-machine grading tests need.
TEST_EXTRAS = ("dev", "hub", "site", "lite", "cluster")


def setup(venv, torch_spec=None, wheels=None, dev=True):
    """Create the virtual environment if missing, install torch if missing, then the course.

    dev=True (make test) adds the test tools (pyproject's extras in TEST_EXTRAS: hypothesis, playwright, ...);
    a learner's `make lab` leaves them out (playwright alone is about 170 MB).
    """
    check_python()
    venv = os.path.abspath(venv)
    python = venv_python(venv)
    if os.path.exists(python) and (_fresh(venv, STAMP) or (not dev and _fresh(venv, LAB_STAMP))):
        return python
    if not os.path.exists(python):
        say("Creating the virtual environment in %s/" % os.path.relpath(venv, ROOT))
        code = subprocess.call([sys.executable, "-m", "venv", venv])
        if code != 0 or not os.path.exists(python):
            fail("could not create a virtual environment with %s -m venv.\n"
                 "  On Debian or Ubuntu (and WSL): sudo apt install python3-venv" % sys.executable)
    offline = []
    if wheels:
        offline = ["--no-index", "--find-links", wheels]
        say("Installing from the wheelhouse %s (no network needed)" % wheels)
    has_torch = subprocess.call([python, "-c", "import torch"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) == 0
    if has_torch:
        say("Keeping the torch already in %s/" % os.path.relpath(venv, ROOT))
    else:
        if wheels:
            args, why = (torch_spec.split() if torch_spec else [DEFAULT_TORCH]), "torch from the wheelhouse"
            args = [a for a in args if a not in ("--index-url", CPU_INDEX)]
        else:
            args, why = torch_choice(torch_spec)
        say("Installing " + why + " (once)")
        pip(python, offline + args)
    say("Installing the course and its tools%s into %s/" % (" (and the test tools)" if dev else "",
                                                          os.path.relpath(venv, ROOT)))
    pip(python, offline + ["-e", ".[%s]" % ",".join(TEST_EXTRAS) if dev else "."])
    with open(os.path.join(venv, STAMP if dev else LAB_STAMP), "w") as f:
        f.write("installed\n")
    return python


def requirements():
    """Every requirement the course installs: build system, dependencies and the test extras (from pyproject.toml)."""
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    reqs = list(project["build-system"]["requires"]) + ["wheel", "pip"]
    reqs += [r for r in project["project"]["dependencies"] if not r.startswith("torch")]
    extras = project["project"].get("optional-dependencies", {})
    reqs += [r for name in TEST_EXTRAS for r in extras.get(name, [])]  # make test offline too
    return reqs


def wheelhouse(folder, torch_spec=None, platforms=()):
    """Download every wheel the course needs into folder, for `make lab` in a room without network."""
    check_python()
    folder = os.path.abspath(folder)
    os.makedirs(folder, exist_ok=True)
    if torch_spec:
        torch_args = torch_spec.split()
    else:
        system = None
        if platforms:  # wheels for another machine: choose torch for its system, not this one's
            system = ("Darwin" if platforms[0].startswith("macosx") else
                      "Windows" if platforms[0].startswith("win") else "Linux")
        torch_args, why = torch_choice(None, system=system, gpu=False if platforms else None)
        say("torch: " + why)
    base = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", folder]
    for plat in platforms:
        base += ["--platform", plat]
    if platforms:
        base += ["--python-version", "%d.%d" % sys.version_info[:2]]
    say("Downloading torch into %s" % folder)
    code = subprocess.call(base + torch_args, cwd=ROOT)
    if code == 0:
        say("Downloading the course's other packages into %s" % folder)
        code = subprocess.call(base + requirements() + lock_args(), cwd=ROOT)
    if code != 0:
        fail("pip download failed (exit %d); see its message above." % code)
    wheels = [n for n in os.listdir(folder) if n.endswith(".whl")]
    size = sum(os.path.getsize(os.path.join(folder, n)) for n in wheels)
    say("wheelhouse: %d wheels, %.0f MB in %s\n  Copy the course folder with it to each laptop (USB stick, "
        "a share); `make lab` there installs from it without network." % (len(wheels), size / 1e6, folder))
    return folder


def port_free(port, host="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def pick_port(port=None):
    """The port to serve on: the one asked for (an error if taken), or 8888, or the next free one after it."""
    if port is not None:
        if not port_free(port):
            fail("port %d is already in use (another JupyterLab, perhaps: its terminal window, or "
                 "`jupyter server list`). Stop it, or choose another port: make lab PORT=%d   "
                 "(or python3 bootstrap.py lab --port %d)" % (port, port + 1, port + 1))
        return port
    for candidate in range(DEFAULT_PORT, DEFAULT_PORT + 20):
        if port_free(candidate):
            if candidate != DEFAULT_PORT:
                say("Port %d is already in use (another JupyterLab?); using port %d instead." % (DEFAULT_PORT, candidate))
            return candidate
    fail("ports %d-%d are all in use: choose a free one with make lab PORT=NNNN" % (DEFAULT_PORT, DEFAULT_PORT + 19))


def lab_command(python, port, extra=(), root=ROOT):
    """The JupyterLab command line: the course folder `root` served, lesson 00 opened first."""
    cmd = [python, "-m", "jupyterlab", "--ServerApp.root_dir=" + root, "--ip=127.0.0.1",
           "--port=%d" % port, "--ServerApp.port_retries=0",
           "--LabApp.app_settings_dir=" + LAB_SETTINGS_DIR]
    if not any(a.startswith("--LabApp.default_url=") for a in extra):  # make slides opens a slideshow instead
        cmd.append("--LabApp.default_url=/lab/tree/" + FIRST_PAGE)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and CI run as root; JupyterLab refuses without this
    return cmd + list(extra)


def learner_course(python):
    """The folder learners get: this one when it is a release, else the release built from it into build/release.

    A release (made by `make release`, it has release.json) holds no solutions, tests or instructor
    kit. In the authored repository, JupyterLab serves build/release, so a learner's kernel and file
    browser see the release, never the answers; rebuilding it keeps my-work/ and your changed files.
    """
    if os.path.exists(os.path.join(ROOT, RELEASE_MANIFEST)):
        return ROOT
    course = os.path.join(ROOT, "build", "release")
    if subprocess.call([python, "-m", "graphcourse.authoring.release", "--out", course, "--quiet"], cwd=ROOT) != 0:
        fail("could not build the learner course into build/release (the message above says why)")
    return course


def course_env(course):
    """The environment JupyterLab and its kernels run in: the course folder's own packages first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([course] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def lab_env(course):
    """The environment of `make lab`: course_env, and the course's Jupyter Server settings (LAB_SETTINGS_DIR's
    jupyter_server_config.py: idle kernels shut down) added to JUPYTER_CONFIG_PATH."""
    env = course_env(course)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p] + [LAB_SETTINGS_DIR])
    return env


def lab(venv, port=None, extra=(), torch_spec=None, wheels=None, no_setup=False):
    if no_setup:  # make has set up already (its lab target depends on setup)
        python = venv_python(os.path.abspath(venv))
        if not os.path.exists(python):
            fail("no virtual environment in %s: run make setup (or python3 bootstrap.py setup)" % venv)
    else:
        python = setup(venv, torch_spec, wheels, dev=False)
    port = pick_port(port)
    course = learner_course(python)
    env = lab_env(course)
    subprocess.call([python, "-m", "graphcourse.authoring.mycopy", "--quiet"], cwd=course, env=env)
    where = "" if course == ROOT else " (the course learners get, built from this repository into build/release)"
    start = [a.split("=", 1)[1] for a in extra if a.startswith("--LabApp.default_url=")]  # make slides gives one
    say("Opening the course%s: JupyterLab on http://127.0.0.1:%d, starting at %s (Ctrl-C to stop).\n"
        "  Your exercises copy is my-work/; the lessons are in notebooks/."
        % (where, port, start[-1].lstrip("/") if start else FIRST_PAGE))
    cmd = lab_command(python, port, extra, root=course)
    if os.name == "posix":  # become JupyterLab: Ctrl-C and a kill reach it, nothing is left behind
        os.chdir(course)
        sys.stdout.flush()
        os.execve(python, cmd, env)
    try:
        return subprocess.call(cmd, cwd=course, env=env)
    except KeyboardInterrupt:
        return 0


def test(venv, torch_spec=None, wheels=None):
    python = setup(venv, torch_spec, wheels)
    steps = [
        [python, "-m", "graphcourse.authoring.build_exercises", "--check"],
        [python, "-m", "pytest", "-q", "tests"],
        [python, "-m", "pytest", "-q", "-p", "no:randomly", "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", "nbval-sanitize.cfg", "notebooks", "solutions"],
    ]
    for cmd in steps:
        say("+ " + " ".join(os.path.relpath(c, ROOT) if c == python else c for c in cmd))
        code = subprocess.call(cmd, cwd=ROOT)
        if code != 0:
            return code
    return 0


# ---- make update: a course got with git, updated without losing what the learner ran ------------------------------
LESSON_FOLDERS = ("notebooks", "exercises")
"""Where make update moves the learner's version aside: JupyterLab autosaves a lesson (or an exercise notebook) with
the learner's runs, and a changed tracked file stops `git pull`. Nothing outside these folders is touched."""
KEPT_DIR = "my-work/kept-from-update"  # my-work/ is git-ignored: git never reads or writes it


class UpdateRefused(Exception):
    """make update stopped before changing any file; the message says why and what to do."""


class UpdateFailed(Exception):
    """The merge failed after the learner's files were moved aside; the message says where everything is."""


def _git(root, *args, **kwargs):
    """git args in the course folder, its output captured (never prompting for a password)."""
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return subprocess.run(["git"] + list(args), cwd=root, capture_output=True, text=True, env=env, **kwargs)


def _git_out(root, *args):
    done = _git(root, *args)
    if done.returncode != 0:
        raise UpdateRefused("`git %s` failed: %s" % (" ".join(args), (done.stderr or done.stdout).strip()[-800:]))
    return done.stdout


def _z(text):
    return [p for p in text.split("\0") if p]


def _learner_changes(root):
    """{path: git's two-letter status} of every tracked file changed in the index or the working tree."""
    entries, changes = _z(_git_out(root, "status", "--porcelain=v1", "-z", "--untracked-files=no")), {}
    i = 0
    while i < len(entries):
        code, path = entries[i][:2], entries[i][3:]
        changes[path] = code
        i += 2 if code[0] in "RC" else 1  # a rename or copy is followed by its original path
    return changes


def _is_lesson(path):
    return path.split("/", 1)[0] in LESSON_FOLDERS


def _here(root, path):
    return os.path.join(root, *path.split("/"))


def _kept_target(root, day, path):
    """my-work/kept-from-update/<day>/<path>, as "name (2).ipynb", "name (3).ipynb", ... when an earlier kept file
    has that name (the naming `make release` uses)."""
    target = _here(root, "/".join([KEPT_DIR, day, path]))
    stem, suffix = os.path.splitext(target)
    n = 2
    while os.path.lexists(target):
        target = "%s (%d)%s" % (stem, n, suffix)
        n += 1
    return target


def _rel(root, path):
    return os.path.relpath(path, root).replace(os.sep, "/")


def update(root=ROOT, day=None):
    """Update a course got with git (`git pull --ff-only`), first moving aside into my-work/kept-from-update/<day>/
    each lesson or exercise notebook the learner changed that the update changes too; returns an exit status.

    The pull runs as its two steps, `git fetch` then `git merge --ff-only` of what was fetched, so that everything is
    checked before a file is changed. Refused with nothing changed: a folder that is not a git clone, a branch with no
    remote branch or with commits of its own, and a file the update changes that the learner changed outside
    notebooks/ and exercises/ (named, with how to keep it). A changed lesson the update does not change stays where it
    is, as `make release` leaves it. If the merge fails, every moved file is put back as it was (its index entry too),
    or the message says where it is.
    """
    import datetime
    root = os.path.abspath(root)
    try:
        _update(root, day or datetime.date.today().isoformat())
    except UpdateRefused as exc:
        sys.stderr.write("make update: nothing was changed. %s\n" % exc)
        return 2
    except UpdateFailed as exc:
        sys.stderr.write("make update: %s\n" % exc)
        return 1
    return 0


def _refuse_unless_a_clone(root):
    if shutil.which("git") is None:
        raise UpdateRefused("git is not installed here (make update runs `git pull`): install git, or update the "
                            "course the way you got it.")
    top = _git(root, "rev-parse", "--show-toplevel")
    if top.returncode == 0 and os.path.realpath(top.stdout.strip()) == os.path.realpath(root):
        return
    if top.returncode == 0 and os.path.exists(os.path.join(root, RELEASE_MANIFEST)):
        raise UpdateRefused("%s is a release built inside the repository %s: run make update there; its `make lab` "
                            "(or `make release`) then rebuilds this folder, keeping your changed lessons in "
                            "my-work/kept-from-update/." % (root, top.stdout.strip()))
    raise UpdateRefused("%s is not a git clone of the course, so there is nothing to pull. A course got with "
                        "`git clone` updates with make update; one got another way (a zip, a copy) updates by getting "
                        "the new course and moving your my-work/ folder into it." % root)


def _update(root, day):
    _refuse_unless_a_clone(root)
    upstream = _git(root, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    if upstream.returncode != 0:
        raise UpdateRefused("this branch follows no branch of a remote, so there is nothing to pull from (`git status` "
                            "says which branch you are on; `git checkout main` goes back to the course's).")
    upstream = upstream.stdout.strip()
    merging = os.path.exists(_here(root, _git_out(root, "rev-parse", "--git-path", "MERGE_HEAD").strip()))
    if merging or any("U" in code or code in ("AA", "DD") for code in _learner_changes(root).values()):
        raise UpdateRefused("a git merge is half done here (`git status` shows it): finish it, or undo it with "
                            "`git merge --abort`, then run make update again.")
    say("Fetching the course's update (git fetch) ...")
    fetched = _git(root, "fetch", "--quiet")
    if fetched.returncode != 0:
        raise UpdateRefused("`git fetch` failed, so nothing was downloaded (no network? has the course moved?):\n  "
                            + (fetched.stderr or fetched.stdout).strip()[-800:])
    own = _git_out(root, "rev-list", "--count", "@{upstream}..HEAD").strip()
    if own != "0":
        raise UpdateRefused("your branch has %s commit(s) of its own (`git log --oneline @{upstream}..HEAD` lists "
                            "them), and make update only fast-forwards to the course's %s. Keep them on a branch of "
                            "their own (`git branch my-commits`), or replay them on the update (`git pull --rebase`)."
                            % (own, upstream))
    head = _git_out(root, "rev-parse", "HEAD").strip()
    if head == _git_out(root, "rev-parse", "@{upstream}").strip():
        say("The course is up to date (%s); nothing was changed." % upstream)
        return []
    incoming = set(_z(_git_out(root, "diff", "--name-only", "--no-renames", "-z", "HEAD", "@{upstream}")))
    changed = [p for p in _learner_changes(root) if p in incoming]
    untracked = [p for p in _z(_git_out(root, "ls-files", "--others", "--exclude-standard", "-z")) if p in incoming]
    blocking = sorted(p for p in changed + untracked if not _is_lesson(p))
    if blocking:
        raise UpdateRefused(
            "the update changes these files, which you changed too, and make update moves aside only what you changed "
            "in notebooks/ and exercises/:\n    %s\n  For each: `git diff -- PATH` shows your change; to keep it, copy "
            "the file into my-work/ (git never touches that folder); then `git checkout -- PATH` puts the course's "
            "version back (a file git does not track: move it into my-work/). Then run make update again."
            % "\n    ".join(blocking))
    moving = sorted(changed + untracked)
    index_before = {p: _z(_git_out(root, "ls-files", "-s", "-z", "--", p)) for p in moving}
    moved, made = [], []  # (path, its kept copy, or None where the learner had deleted it); folders made
    for path in moving:
        if not os.path.lexists(_here(root, path)):
            moved.append((path, None))
            continue
        target = _kept_target(root, day, path)
        folder = os.path.dirname(target)
        while not os.path.isdir(folder):
            made.append(folder)
            folder = os.path.dirname(folder)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(_here(root, path), target)
        moved.append((path, target))
    if moving:  # the course's version back in place of each: the index entry and the file
        in_head = set(_z(_git_out(root, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *moving)))
        _git_out(root, "reset", "-q", "HEAD", "--", *moving)
        if in_head:
            _git_out(root, "checkout", "-q", "HEAD", "--", *sorted(in_head))
        for path in moving:
            if path not in in_head and os.path.lexists(_here(root, path)):
                os.remove(_here(root, path))  # new to the course and to you: yours is kept
    say("Updating %s to %s (git merge --ff-only) ..." % (head[:9], upstream))
    merged = _git(root, "merge", "--ff-only", "--quiet", "@{upstream}")
    if merged.returncode != 0:
        raise UpdateFailed(_put_back(root, head, index_before, moved, made, (merged.stderr or merged.stdout).strip()))
    say("Updated the course: %s -> %s, %d file(s) changed."
        % (head[:9], _git_out(root, "rev-parse", "HEAD").strip()[:9], len(incoming)))
    kept = [(p, t) for p, t in moved if t]
    if kept:
        say("These held your runs or edits and the update changes them, so your versions are kept in my-work/ (which "
            "git and make update never overwrite):")
        for path, target in kept:
            say("  %s -> %s" % (path, _rel(root, target)))
    say("If JupyterLab is open, reload each open lesson (File > Reload Notebook from Disk) before you run it.")
    if not os.path.exists(os.path.join(root, RELEASE_MANIFEST)):
        say("make lab rebuilds the learner course in build/release from the update (a lesson you changed there moves "
            "to build/release/my-work/kept-from-update/).")
    return kept


def _put_back(root, head, index_before, moved, made, why):
    """After a failed merge: each moved file and its index entry back as they were; returns what to tell."""
    kept = "\n    ".join("%s -> %s" % (p, _rel(root, t)) for p, t in moved if t) or "(none)"
    if _git(root, "rev-parse", "HEAD").stdout.strip() != head:
        return ("the update stopped half-way (git said: %s).\n  Your versions are kept:\n    %s\n  `git status` shows "
                "where the course is; run make update again, or ask your instructor." % (why, kept))
    try:
        for path, target in moved:
            if target:
                shutil.copy2(target, _here(root, path))
            elif os.path.lexists(_here(root, path)):
                os.remove(_here(root, path))
        lines = []
        for path, entries in index_before.items():  # `git ls-files -s` lines; mode 0 takes a path out of the index
            lines += entries or ["0 %s\t%s" % ("0" * len(head), path)]
        done = _git(root, "update-index", "-z", "--index-info", input="\0".join(lines) + "\0")
        if done.returncode != 0:
            raise OSError(done.stderr.strip())
    except OSError as exc:
        return ("the update failed (git said: %s), and putting your files back failed too (%s). Your versions are "
                "kept:\n    %s" % (why, exc, kept))
    for _, target in moved:
        if target:
            os.remove(target)
    for folder in sorted(made, key=len, reverse=True):  # a folder before its parent
        if os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)
    return ("the update failed, and everything is as it was before make update (your changed files are back in "
            "place). git said:\n  %s" % why)


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(prog="python3 bootstrap.py", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["setup", "setup-lab", "lab", "test", "wheelhouse", "my-exercises", "which-torch",
                                            "lock", "update"])
    parser.add_argument("--venv", default=os.environ.get("VENV", os.path.join(ROOT, ".venv")))
    parser.add_argument("--port", type=int, default=int(os.environ["PORT"]) if os.environ.get("PORT") else None)
    parser.add_argument("--torch", default=os.environ.get("TORCH") or None,
                        help='the torch to install, as pip arguments, e.g. "torch==2.13.0 --index-url URL"')
    parser.add_argument("--wheelhouse", default=None, help="install from this folder of wheels (default: ./wheelhouse if present)")
    parser.add_argument("--platform", action="append", default=[],
                        help="wheelhouse only: download wheels for another platform (pip download --platform), repeatable")
    parser.add_argument("--no-setup", action="store_true", help="lab only: use the environment as it is")
    parser.add_argument("lab_args", nargs="*", help="lab only: extra JupyterLab options, after --")
    args = parser.parse_args(argv)
    check_python()
    if args.command == "wheelhouse":
        wheelhouse(args.wheelhouse or os.path.join(ROOT, "wheelhouse"), args.torch, args.platform)
        return 0
    if args.command == "which-torch":
        say(torch_choice(args.torch)[1])
        return 0
    if args.command == "update":
        return update()
    wheels = wheelhouse_dir(args.wheelhouse)
    if args.command in ("setup", "setup-lab"):
        setup(args.venv, args.torch, wheels, dev=args.command == "setup")
        return 0
    if args.command == "lock":
        python = setup(args.venv, args.torch, wheels)
        write_lock(python)
        return 0
    if args.command == "my-exercises":
        python = setup(args.venv, args.torch, wheels, dev=False)
        course = learner_course(python)
        return subprocess.call([python, "-m", "graphcourse.authoring.mycopy"], cwd=course, env=course_env(course))
    if args.command == "lab":
        return lab(args.venv, args.port, args.lab_args, args.torch, wheels, args.no_setup)
    return test(args.venv, args.torch, wheels)


if __name__ == "__main__":
    if sys.version_info[:2] < MIN_PYTHON:
        check_python()
    sys.exit(main())
