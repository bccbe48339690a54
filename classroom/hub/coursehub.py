"""The class server's tools: learners' Unix accounts, each learner's copy of the course, checks.

Run with the course's Python (the one JupyterHub runs from), as root for the account commands:

    .venv/bin/python classroom/hub/coursehub.py add-users ada grace ...   # accounts + passwords sheet
    .venv/bin/python classroom/hub/coursehub.py remove-users ada grace    # accounts (homes kept)
    .venv/bin/python classroom/hub/coursehub.py check                     # can learners run the course?

Every learner is a Unix user in one group (``course-learners`` unless ``COURSE_HUB_GROUP`` says
otherwise); JupyterHub lets exactly that group sign in (PAM: the Unix password), and starts each
learner's JupyterLab AS that user (LocalProcessSpawner) in their home, which is mode 700: a
learner's kernel cannot read a classmate's files. The learner's server starts through
``coursehub.py singleuser``, running as the learner: it copies the course into
``~/cuda-graphs-course`` (lessons, exercises, toygraph and graphcourse source, data; never
``solutions/``), adding only files that are missing, so nothing a learner wrote is ever
overwritten, and puts that copy first on the learner's ``PYTHONPATH``.

Standard library only (jupyterhub_config.py imports it). Settings come from the environment,
so that ``make hub`` and tests can set them:

    COURSE_HUB_ROOT       state folder: hub database, cookie secret, passwords sheet, logs
                          (default classroom/hub/state, git-ignored)
    COURSE_HUB_GROUP      the learners' Unix group (default course-learners)
    COURSE_HUB_HOME_ROOT  where add-users creates homes (default /home)
    COURSE_HUB_IP, COURSE_HUB_PORT    where the class connects (default 0.0.0.0:8000)
    COURSE_HUB_ADMINS     comma-separated instructor accounts with JupyterHub admin rights
    COURSE_HUB_SSL_CERT, COURSE_HUB_SSL_KEY   serve HTTPS (recommended on a shared network)
    COURSE_HUB_HUB_PORT, COURSE_HUB_PROXY_API_PORT   the hub's and the proxy's API ports on 127.0.0.1
                          (default JupyterHub's 8081 and 8001; change them beside another JupyterHub)
"""

from __future__ import annotations

import argparse
import csv
import grp
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
COURSE_DIR = "cuda-graphs-course"  # the learner's copy: ~/cuda-graphs-course
# A learner's copy is the release (graphcourse.authoring.release): never solutions/ (the model answers), tests/
# (the wrong answers and the grader's fixtures), the instructor kit, .git or the virtualenv.
NEVER_COPY_DIRS = {"__pycache__", ".ipynb_checkpoints", "instructor", "node_modules"}
# Readable by learners would hand them the model answers or near-answers (root, the grader, still
# reads them): solutions/, tests/ (a whole ex01 answer in the browser test, the wrong answers, each
# a model answer with one mistake), the instructor kit, and the release build (its own copy of
# the authored tree's build outputs; learners get their own copy from COPY).
PRIVATE = ["solutions", "tests", "docs/instructor", "build"]
PROXY = HERE / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
USERNAME = re.compile(r"^[a-z][a-z0-9_-]{0,30}$")
NOBODY = "nobody"


class HubSetupError(RuntimeError):
    """The class server cannot start or a command cannot run; the message says how to fix it."""


# --------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------


def state_dir() -> Path:
    return Path(os.environ.get("COURSE_HUB_ROOT") or HERE / "state").resolve()


def learners_group() -> str:
    return os.environ.get("COURSE_HUB_GROUP") or "course-learners"


def home_root() -> Path:
    return Path(os.environ.get("COURSE_HUB_HOME_ROOT") or "/home")


def venv_python() -> Path:
    """The course's Python: the one running this file (JupyterHub runs from the course's venv)."""
    return Path(sys.executable)


def venv_bin() -> Path:
    return venv_python().parent


# --------------------------------------------------------------------------------------
# The learner's copy of the course (runs AS the learner, from the single-user server start)
# --------------------------------------------------------------------------------------


def _add_missing(target: Path, rel: str, data: bytes, mtime_ns: int, added: list[str]) -> None:
    """Write target/rel unless something is there already; never write through a link or a non-folder the learner
    put on the way (that file is left out, as any file the learner has)."""
    parts = Path(rel).parts
    here = target
    for part in parts[:-1]:
        here = here / part
        if os.path.lexists(here):
            if here.is_symlink() or not here.is_dir():
                return
        else:
            here.mkdir()
    dest = here / parts[-1]
    if os.path.lexists(dest):
        return
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(dest, (0o755 if rel == "bootstrap.py" else 0o644) & ~_umask())
    os.utime(dest, ns=(mtime_ns, mtime_ns))  # the course's time: a learner's edit is always newer, and make
    added.append(str(dest))                   # finds the course's environment up to date


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_learner_copy(home: Path, course: Path = REPO) -> tuple[Path, list[str]]:
    """~/cuda-graphs-course: the course learners get (the release: graphcourse.authoring.release, the same files and
    bytes as `make release`, so no answer, test or instructor page, and the learner's README), with only missing
    files added. Returns (copy, added)."""
    from graphcourse.authoring.release import course_files, released_bytes

    target = Path(home) / COURSE_DIR
    added: list[str] = []
    if os.path.lexists(target) and (target.is_symlink() or not target.is_dir()):
        raise HubSetupError(f"{target} exists and is not a folder: rename it, then restart your server")
    target.mkdir(exist_ok=True)
    files = course_files(course)
    listed = set(files)
    for rel in files:
        if any(part in NEVER_COPY_DIRS for part in Path(rel).parts):
            continue
        _add_missing(target, rel, released_bytes(course, rel, listed), (course / rel).stat().st_mtime_ns, added)
    return target, added


def singleuser(argv: list[str]) -> None:
    """The learner's server start (JupyterHub's Spawner.cmd): copy the course, then exec
    jupyterhub-singleuser from the course's venv with the learner's copy importable."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    if os.getuid() == 0:
        raise HubSetupError("refusing to start a learner's server as root")
    os.umask(0o077)  # whatever the learner saves is theirs alone
    copy, added = make_learner_copy(home)
    print(f"coursehub: {copy} ready ({len(added)} file(s) added from the course)", file=sys.stderr)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy)  # the learner's own toygraph/graphcourse, as in a clone
    env.pop("PYTHONHOME", None)
    # The course's Makefile in the copy uses the course's environment (make check, make my-exercises, make slides...),
    # never a .venv of its own: VENV overrides the Makefile's default, in terminals and notebooks alike.
    env["VENV"] = str(venv_bin().parent)
    # my-work/: the learner's own copy of each exercise notebook, as `make lab` makes it (made once, never rewritten;
    # new exercises merged in at each start).
    subprocess.call([str(venv_python()), "-m", "graphcourse.authoring.mycopy", "--quiet"], cwd=copy, env=env)
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    # JupyterLab without news and update pop-ups (the class server's own Jupyter config)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        filter(None, [str(HERE / "jupyter-config"), env.get("JUPYTER_CONFIG_PATH")]))
    os.chdir(home)
    exe = venv_bin() / "jupyterhub-singleuser"
    os.execve(str(exe), [str(exe), *argv], env)


# --------------------------------------------------------------------------------------
# Checks: can a learner (an unprivileged user) run the course?
# --------------------------------------------------------------------------------------


def run_as(user: str, cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """Run cmd as the Unix user (from root), exactly as JupyterHub's LocalProcessSpawner starts
    a learner's server: the user's uid, gid and groups, set in the child before exec."""
    entry = pwd.getpwnam(user)
    return subprocess.run(
        cmd, user=entry.pw_uid, group=entry.pw_gid,
        extra_groups=os.getgrouplist(entry.pw_name, entry.pw_gid),
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"},
        capture_output=True, text=True, timeout=timeout, cwd="/", stdin=subprocess.DEVNULL,
    )


def _blocking_dir(path: Path) -> Path | None:
    """The first folder on the way to path that others cannot enter (mode without o+x)."""
    for parent in reversed(Path(path).parents):
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return parent
        except OSError:
            return parent
    return None


def check_learner_access(user: str = NOBODY) -> None:
    """Raise HubSetupError unless an unprivileged user can run the course's Python with
    JupyterHub and the course's packages, and read the course."""
    python = venv_python()
    probe = ("import jupyterhub, jupyterlab, ipykernel, nbformat, toygraph, graphcourse; "
             f"open({str(REPO / 'notebooks' / '01_the_big_idea.ipynb')!r}).close()")
    try:
        result = run_as(user, [str(python), "-c", probe])
    except PermissionError as exc:  # the exec itself was refused
        result = subprocess.CompletedProcess([], 126, "", str(exc))
    if result.returncode == 0:
        return
    blocked = _blocking_dir(python.resolve()) or _blocking_dir(REPO)
    hint = (f"{blocked} is closed to other users (mode {oct(os.stat(blocked).st_mode & 0o777)}): "
            f"install the course with a Python and in a folder every user can read (e.g. "
            f"/srv/cuda-graphs-course with make PYTHON=/usr/bin/python3), or open that folder "
            f"for traversal only: chmod o+x {blocked}" if blocked else
            "make sure the course folder and its .venv are readable by all users (chmod -R o+rX)")
    last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
    raise HubSetupError(f"learners cannot run the course's Python {python} ({last}). {hint}")


def protect_private(course: Path = REPO) -> list[str]:
    """Close the model answers to learners (chmod go-rwx; root and the grader still read
    them). Returns what was closed."""
    closed = []
    for rel in PRIVATE:
        path = course / rel
        if path.exists() and not path.is_symlink() and os.stat(path).st_mode & 0o077:
            os.chmod(path, os.stat(path).st_mode & 0o700)
            closed.append(str(path))
    git = course / ".git"
    if git.is_dir() and not git.is_symlink() and os.stat(git).st_mode & 0o077:
        os.chmod(git, os.stat(git).st_mode & 0o700)  # the history holds the solutions too
        closed.append(str(git))
    return closed


def check_proxy() -> Path:
    if shutil.which("node") is None:
        raise HubSetupError("node is not installed: apt-get install nodejs npm "
                            "(JupyterHub's proxy is a Node.js program)")
    if not PROXY.exists():
        raise HubSetupError(f"JupyterHub's proxy is not installed: npm ci --prefix {HERE / 'node'}")
    return PROXY


# --------------------------------------------------------------------------------------
# Learners' accounts (root)
# --------------------------------------------------------------------------------------


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise HubSetupError(f"{what} creates and changes Unix accounts: run it as root (sudo)")


def _members(group: str) -> set[str]:
    try:
        g = grp.getgrnam(group)
    except KeyError:
        return set()
    return set(g.gr_mem) | {p.pw_name for p in pwd.getpwall() if p.pw_gid == g.gr_gid}


def learners(group: str | None = None) -> dict[str, Path]:
    """{username: home} for every member of the learners' group."""
    group = group or learners_group()
    return {name: Path(pwd.getpwnam(name).pw_dir) for name in sorted(_members(group))}


def add_users(names: list[str], group: str | None = None, homes: Path | None = None,
              sheet: Path | None = None) -> list[tuple[str, str]]:
    """Create learners' Unix accounts with random passwords; append them to the passwords sheet
    (a CSV, mode 600). An existing account is left as it is (its password unchanged)."""
    _require_root("add-users")
    group = group or learners_group()
    homes = Path(homes or home_root())
    bad = [n for n in names if not USERNAME.match(n)]
    if bad:
        raise HubSetupError(f"not a usable user name: {', '.join(map(repr, bad))} (lowercase letters, "
                            "digits, '-' and '_', starting with a letter, at most 31 characters)")
    try:
        grp.getgrnam(group)
    except KeyError:
        subprocess.run(["groupadd", group], check=True)
    homes.mkdir(parents=True, exist_ok=True)
    created: list[tuple[str, str]] = []
    for name in names:
        try:
            pwd.getpwnam(name)
            print(f"{name}: the account exists, left as it is")
            if name not in _members(group):
                subprocess.run(["usermod", "-a", "-G", group, name], check=True)
            continue
        except KeyError:
            pass
        home = homes / name
        subprocess.run(["useradd", "--create-home", "--home-dir", str(home), "--user-group",
                        "--groups", group, "--shell", "/bin/bash", "--comment",
                        "cuda-graphs-course learner", name], check=True)
        os.chmod(home, 0o700)  # a classmate cannot even list it
        password = "-".join(secrets.token_hex(3) for _ in range(3))
        subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)
        created.append((name, password))
    if created:
        sheet = Path(sheet or state_dir() / "passwords.csv")
        sheet.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the hub's secrets live there too
        new = not sheet.exists()
        fd = os.open(sheet, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "w", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(["user", "password"])
            writer.writerows(created)
        print(f"{len(created)} account(s) created; their passwords are in {sheet} (mode 600)")
    return created


def _drop_from_sheet(sheet: Path, names: set[str]) -> int:
    """Remove the rows of these learners from the passwords sheet (a removed account's password is no one's business,
    and one added again later gets a row of its own). Returns how many rows went."""
    try:
        rows = list(csv.reader(sheet.read_text().splitlines()))
    except FileNotFoundError:
        return 0
    keep = [r for r in rows if not (r and r[0] in names)]
    if len(keep) != len(rows):
        tmp = sheet.with_name(sheet.name + ".part")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", newline="") as f:
            csv.writer(f).writerows(keep)
        os.replace(tmp, sheet)
    return len(rows) - len(keep)


def remove_users(names: list[str], group: str | None = None, delete_homes: bool = False,
                 sheet: Path | None = None) -> None:
    """Delete learners' accounts and their rows in the passwords sheet; only members of the learners' group, never
    anyone else."""
    _require_root("remove-users")
    group = group or learners_group()
    members = _members(group)
    gone = [n for n in names if n in members]
    for name in names:
        if name not in members:
            print(f"{name}: not in group {group}, left alone")
            continue
        home = Path(pwd.getpwnam(name).pw_dir)
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)  # a kernel left running
        subprocess.run(["userdel", name], check=True)
        if delete_homes:
            shutil.rmtree(home, ignore_errors=True)
        print(f"{name}: removed" + (f", {home} deleted" if delete_homes else f" ({home} kept)"))
    sheet = Path(sheet or state_dir() / "passwords.csv")
    if gone and _drop_from_sheet(sheet, set(gone)):
        print(f"{sheet}: their passwords removed")
    try:
        grp.getgrnam(group)
    except KeyError:
        return
    if not _members(group):  # the last learner is gone: the group add-users made goes too
        subprocess.run(["groupdel", group], check=False)
        print(f"group {group}: removed (no learner left in it)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="coursehub.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add-users", help="create learners' accounts and a passwords sheet")
    add.add_argument("names", nargs="*", metavar="NAME")
    add.add_argument("--from-file", type=Path, help="one user name per line")
    add.add_argument("--group", default=None, help="the learners' group (default: COURSE_HUB_GROUP "
                                                   "or course-learners)")
    add.add_argument("--home-root", type=Path, default=None, help="where homes go (default /home)")
    add.add_argument("--passwords", type=Path, default=None,
                     help="the passwords sheet to append to (default: <state>/passwords.csv)")
    rm = sub.add_parser("remove-users", help="delete learners' accounts (homes kept unless told)")
    rm.add_argument("names", nargs="*", metavar="NAME")
    rm.add_argument("--all", action="store_true", help="every member of the learners' group")
    rm.add_argument("--group", default=None)
    rm.add_argument("--delete-homes", action="store_true")
    rm.add_argument("--passwords", type=Path, default=None,
                    help="the passwords sheet to remove their rows from (default: <state>/passwords.csv)")
    sub.add_parser("list", help="the learners and their homes")
    sub.add_parser("check", help="check that learners can run the course and the proxy is installed")
    su = sub.add_parser("singleuser", help="(used by JupyterHub) start a learner's server")
    su.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.command == "singleuser":
            singleuser(args.args)
        elif args.command == "add-users":
            names = list(args.names)
            if args.from_file:
                names += [ln.strip() for ln in args.from_file.read_text().splitlines()
                          if ln.strip() and not ln.lstrip().startswith("#")]
            if not names:
                parser.error("give user names, or --from-file")
            add_users(names, args.group, args.home_root, args.passwords)
        elif args.command == "remove-users":
            names = sorted(learners(args.group)) if args.all else args.names
            remove_users(names, args.group, args.delete_homes, args.passwords)
        elif args.command == "list":
            for name, home in learners().items():
                print(f"{name}\t{home}")
        elif args.command == "check":
            check_proxy()
            check_learner_access()
            print("ok: learners can run the course's Python, and the proxy is installed")
    except (HubSetupError, subprocess.CalledProcessError) as exc:
        print(f"coursehub: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
