"""Confinement for one learner's kernel: bubblewrap namespaces, an unprivileged uid, rlimits, nothing left behind.

How a kernel is started (``Sandbox.kernel_argv``), when bubblewrap (``bwrap``) is installed and the grader runs as root:

    prlimit --as --nproc --fsize --nofile --cpu --core=0 --
      bwrap --die-with-parent --new-session --unshare-pid --unshare-net --unshare-ipc --unshare-uts --unshare-cgroup
            --clearenv --ro-bind /usr /usr ... (system libraries, the Python, the venv, the course's packages and data/,
            read-only) --perms 1777 --tmpfs /tmp (its only writable place besides its socket folder) --proc /proc --dev /dev
            --bind SOCKETS SOCKETS (the ZMQ sockets the grader talks to it through)
            --perms 0555 --dir /grading --chdir /grading (an empty working folder it cannot write)
        setpriv --reuid U --regid U --clear-groups --no-new-privs --bounding-set=-all --inh-caps=-all --
          python -P -m ipykernel_launcher -f SOCKETS/kernel.json (-P: no working folder on sys.path)

* the kernel runs as uid U (``GRADER_UID_BASE`` + the grading slot, one uid per concurrent learner, never root), so the
  process limit (RLIMIT_NPROC counts per uid) of one learner never starves another's;
* it sees no solutions/, no class folder, no report, no other learner, no home folder, no /work: only what is bound;
* it has no network: a new network namespace holds only loopback; the grader talks to it over Unix sockets (ZMQ
  ``ipc://``) in a folder of its own, so nbclient stays outside the sandbox and no port is shared;
* its own pid namespace: it sees and signals only its own processes; when the namespace's first process ends
  (the grader kills it, or the grader dies: ``--die-with-parent``), the kernel ends every process in it, double
  forks and ``setsid`` included;
* its /tmp is a tmpfs of at most ``Limits.tmp_mb`` (1 GiB), and its socket folder (the one place it writes on the
  host) a tmpfs of ``Limits.socket_mb`` (16 MB) where the machine lets root mount one: a learner who fills either
  fails to write, nothing else;
* rlimits: address space (64 GiB instead of 4 for a kernel that may use the GPU: CUDA does not initialise under a
  few GB, see ``GPU_ADDRESS_SPACE_NOTE``), processes, file size, open files, CPU seconds, no core files;
* its own /etc/passwd and /etc/group, naming the grading uid ``learner`` (libraries that ask for a user name work).

Without bubblewrap, or not as root, :func:`detect` says what is missing, and the grader prints and records it loudly.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

GRADER_UID_BASE = 64000  # uids GRADER_UID_BASE .. +999: unused by Debian (system users < 1000, nobody 65534)
LEARNER_NAME = "learner"  # the grading uid's name inside the sandbox (torch.compile, getpass ask for one)
GPU_ADDRESS_SPACE_NOTE = (
    "CUDA reserves far more virtual address space than it uses: under prlimit --as=4GiB, cudaGetDeviceCount() fails "
    "with 'out of memory' (seen on an H200, torch 2.11), while 64 GiB lets it initialise. A kernel that may touch "
    "CUDA gets Limits.gpu_memory_mb instead of memory_mb: still a cap, so a learner who asks for 100 GB is stopped.")


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 4096  # address space per process (torch on CPU maps ~1.5 GB)
    gpu_memory_mb: int = 65536  # the same for a kernel that may touch CUDA (see GPU_ADDRESS_SPACE_NOTE)
    processes: int = 256  # per uid: threads count too
    file_mb: int = 64
    tmp_mb: int = 1024  # the sandbox's /tmp, a tmpfs in memory: without a size it could fill the host's memory
    socket_mb: int = 16  # the socket folder (the one place the kernel writes on the host), a tmpfs of this size
    open_files: int = 512
    cpu_s: int = 900  # CPU seconds per process: a backstop behind the wall-clock limits


@dataclass(frozen=True)
class Confinement:
    """What this machine allows: 'bwrap' (full), or 'none' (with the reasons)."""

    kind: str
    reasons: tuple[str, ...] = ()
    bwrap: str | None = None
    setpriv: str | None = None
    prlimit: str | None = None

    @property
    def confined(self) -> bool:
        return self.kind == "bwrap"

    def describe(self) -> str:
        if self.confined:
            return ("each learner's kernel confined by bubblewrap: own uid, no network, own pid/ipc namespaces, "
                    "read-only course files, no solutions/, class folder or report in sight, rlimits")
        return "NOT CONFINED: " + "; ".join(self.reasons)


def _probe_bwrap(bwrap: str) -> str | None:
    """None when bwrap can build the namespaces here, else why not."""
    try:
        proc = subprocess.run([bwrap, "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc",
                               "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run ({exc})"
    if proc.returncode != 0:
        return f"bwrap cannot create namespaces here ({proc.stderr.strip()[:200] or proc.returncode})"
    return None


def detect() -> Confinement:
    """Which confinement this machine supports for the grader's user."""
    bwrap, setpriv, prlimit = shutil.which("bwrap"), shutil.which("setpriv"), shutil.which("prlimit")
    reasons = []
    if os.environ.get("GRAPHCOURSE_GRADE_UNCONFINED") == "1":  # tests of the warning path; never for a class
        reasons.append("GRAPHCOURSE_GRADE_UNCONFINED=1 is set")
    if os.geteuid() != 0:
        reasons.append("the grader is not running as root, so it cannot give each kernel a uid of its own "
                       "(run it as root, e.g. in CI or `sudo`, to confine learners)")
    if not bwrap:
        reasons.append("bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    if not setpriv or not prlimit:
        reasons.append("setpriv/prlimit (util-linux) are missing")
    if not reasons:
        why = _probe_bwrap(bwrap)
        if why:
            reasons.append(why)
    if reasons:
        return Confinement("none", tuple(reasons), bwrap, setpriv, prlimit)
    return Confinement("bwrap", (), bwrap, setpriv, prlimit)


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


@dataclass
class Sandbox:
    """The command that starts one confined kernel, and the clean-up after it."""

    confinement: Confinement
    slot: int
    socket_dir: Path  # host folder bound at the same path inside: the connection file and the ZMQ sockets
    course_root: Path  # the checkout: only its packages and data/ are bound
    limits: Limits = field(default_factory=Limits)
    packages: tuple[str, ...] = ("toygraph", "graphcourse", "data")
    gpu: bool = False
    uid: int = 0  # the kernel's uid (see UidPool); 0 when not confined
    socket_tmpfs: bool = False  # the socket folder is a size-limited tmpfs of its own (mounted by prepare)

    @property
    def etc_dir(self) -> Path:
        """Host folder (root's, read-only inside) with the passwd and group files the sandbox sees."""
        return self.socket_dir.with_name(self.socket_dir.name + ".etc")

    def prepare(self) -> None:
        """Create the socket folder, owned by the kernel's uid, readable by nobody else; and the sandbox's passwd.

        The grading uid has no entry in the machine's /etc/passwd; libraries that ask for the user's name
        (torch.compile's cache folder, getpass) fail without one, so the sandbox gets its own two-line
        passwd and group naming it ``learner``, with /tmp as its home.
        """
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)  # never parents: a kernel started while the run is being
        # stopped must not recreate the run's scratch folder after the run removed it
        if self.confinement.confined and not self.socket_tmpfs and shutil.which("mount"):
            # the folder is bound writable into the sandbox: on the grader's disk a learner could fill that disk;
            # as a tmpfs of socket_mb it holds the sockets and the connection file, and no more
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.limits.socket_mb}m,mode=0700,nosuid,nodev",
                                   "tmpfs", str(self.socket_dir)], capture_output=True, timeout=30)
            self.socket_tmpfs = done.returncode == 0
        if self.confinement.confined:
            os.chown(self.socket_dir, self.uid, self.uid)
            os.chmod(self.socket_dir, 0o700)
            self.etc_dir.mkdir(mode=0o755, exist_ok=True)
            (self.etc_dir / "passwd").write_text(f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                                 f"{LEARNER_NAME}:x:{self.uid}:{self.uid}:grading:/tmp:/usr/sbin/nologin\n")
            (self.etc_dir / "group").write_text(f"root:x:0:\n{LEARNER_NAME}:x:{self.uid}:\n")
            for f in ("passwd", "group"):
                os.chmod(self.etc_dir / f, 0o644)

    def _ro_paths(self) -> list[str]:
        paths = ["/usr"]
        for extra in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/ssl/certs",
                      "/etc/localtime", "/etc/fonts"):
            if os.path.exists(extra):
                paths.append(extra)
        prefixes = {_real(sys.prefix), _real(sys.base_prefix), _real(sys.exec_prefix), _real(sys.base_exec_prefix)}
        exe = Path(_real(sys.executable))
        prefixes.add(str(exe.parent.parent))
        for p in sorted(prefixes):
            if not p.startswith("/usr/") and p != "/usr":
                paths.append(p)
        root = Path(_real(self.course_root))
        for name in self.packages:
            if (root / name).exists():
                paths.append(str(root / name))
        return paths

    def _dirs_for(self, paths: list[str]) -> list[str]:
        """--dir arguments (mode 0755) for every parent a bind needs, so the kernel's uid can walk to it."""
        seen, args = {"/", "/usr", "/tmp", "/proc", "/dev", "/etc"}, []
        for p in paths:
            parts = Path(p).parts
            for i in range(2, len(parts)):
                parent = str(Path(*parts[:i]))
                if parent not in seen:
                    seen.add(parent)
                    args += ["--perms", "0755", "--dir", parent]
        return args

    def kernel_argv(self, python: str | None = None) -> list[str]:
        """argv for jupyter_client: the kernel, confined (or as is, when confinement is not available)."""
        python = python or str(Path(_real(sys.prefix)) / "bin" / "python")
        kernel = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        if not self.confinement.confined:
            return kernel
        kernel.insert(1, "-P")  # no working folder on sys.path (Python 3.11+)
        if not GRADER_UID_BASE < self.uid < GRADER_UID_BASE + 1000:
            raise ValueError(f"a confined kernel needs a grading uid from UidPool, not {self.uid}")
        lim = self.limits
        ro = self._ro_paths()
        sock = str(self.socket_dir)
        address_mb = lim.gpu_memory_mb if self.gpu else lim.memory_mb  # see GPU_ADDRESS_SPACE_NOTE
        argv = [self.confinement.prlimit, f"--as={address_mb * 1024 * 1024}", f"--nproc={lim.processes}",
                f"--fsize={lim.file_mb * 1024 * 1024}", f"--nofile={lim.open_files}", f"--cpu={lim.cpu_s}", "--core=0",
                "--",
                self.confinement.bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "grading",
                "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(lim.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp",
                "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                "--symlink", "usr/sbin", "/sbin"]  # Triton runs /sbin/ldconfig -p to find libcuda (torch.compile on a GPU)
        if os.path.isdir("/usr/lib64"):
            argv += ["--symlink", "usr/lib64", "/lib64"]
        argv += ["--perms", "0755", "--dir", "/etc"]
        argv += self._dirs_for(ro + [sock])
        for p in ro:
            argv += ["--ro-bind", p, p]
        argv += ["--bind", sock, sock]
        if self.etc_dir.is_dir():
            argv += ["--ro-bind", str(self.etc_dir / "passwd"), "/etc/passwd",
                     "--ro-bind", str(self.etc_dir / "group"), "/etc/group"]
        if self.gpu:
            for dev in sorted(Path("/dev").glob("nvidia*")):
                argv += ["--dev-bind", str(dev), str(dev)]
        env = {"HOME": "/tmp", "USER": LEARNER_NAME, "LOGNAME": LEARNER_NAME, "TMPDIR": "/tmp", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
               "PYTHONPATH": _real(self.course_root), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
               "IPYTHONDIR": "/tmp/.ipython", "MPLCONFIGDIR": "/tmp/.mpl", "MPLBACKEND": "Agg",
               "JUPYTER_RUNTIME_DIR": "/tmp/.jupyter", "JUPYTER_PLATFORM_DIRS": "1", "OMP_NUM_THREADS": "1",
               "GRAPHCOURSE_SANDBOX": "bwrap"}
        argv += ["--clearenv"]
        for k, v in env.items():
            argv += ["--setenv", k, v]
        # its working folder is an empty one it cannot write: a module an answer writes into /tmp (numpy.savetxt
        # of code, say) is not importable by name, which would run code the static review never read; -P keeps the
        # folder off sys.path too
        argv += ["--perms", "0555", "--dir", WORK_DIR, "--chdir", WORK_DIR, "--",
                 self.confinement.setpriv, f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                 "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--"]
        return argv + kernel

    def sweep(self) -> None:
        """Kill every process left with this sandbox's uid (belt and braces behind the pid namespace)."""
        if not self.confinement.confined or not GRADER_UID_BASE < self.uid < GRADER_UID_BASE + 1000:
            return  # never as any other uid: kill(-1) as root would end the machine's processes
        try:
            pid = os.fork()
        except OSError:
            return
        if pid == 0:  # the child takes the sandbox's uid and kills everything of that uid, itself last
            try:
                os.setgroups([])
                os.setgid(self.uid)
                os.setuid(self.uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)

    def remove(self) -> None:
        if self.socket_tmpfs:
            subprocess.run(["umount", "-l", str(self.socket_dir)], capture_output=True, timeout=30)
            self.socket_tmpfs = False
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        shutil.rmtree(self.etc_dir, ignore_errors=True)


def unmount_under(folder: Path) -> None:
    """Unmount (lazily) every mount below `folder`: the socket tmpfs of kernels that did not end cleanly."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return
    root = os.path.realpath(folder) + os.sep
    for line in mounts:
        parts = line.split()
        if len(parts) > 1:
            where = parts[1].encode().decode("unicode_escape")  # /proc/mounts writes spaces as \\040
            if (where + os.sep).startswith(root):
                subprocess.run(["umount", "-l", where], capture_output=True, timeout=30)


WORK_DIR = "/grading"
"""A confined kernel's working folder: empty, and not writable by it."""
MACHINE_LOCKS = Path("/run/graphcourse-grade") if Path("/run").is_dir() else Path("/tmp/graphcourse-grade-uids")
"""Where every grader on this machine takes its uids' locks."""


class UidPool:
    """uids for this run's kernels, none shared with another grader running on the same machine at the same time.

    Each uid in GRADER_UID_BASE .. +999 is taken by holding an flock on a file in a root-only folder; the run's
    watchdog inherits the locks (engine.start_watchdog), so a lock goes when the grader and its watchdog's last sweep
    have ended, however the grader ends. A uid is also skipped while any process still runs with it."""

    def __init__(self, count: int, folder: Path = MACHINE_LOCKS, candidates: Iterable[int] | None = None) -> None:
        """Take `count` uids. `folder` holds the locks: the machine's, unless a test keeps its own; such a test
        passes `candidates`, uids it holds in the machine's pool, so that its sweep never meets a real grader's."""
        import fcntl

        self.fds: list[int] = []
        self.uids: list[int] = []
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        busy = _uids_running()
        for uid in candidates if candidates is not None else range(GRADER_UID_BASE + 1, GRADER_UID_BASE + 1000):
            if len(self.uids) == count:
                break
            if uid in busy:
                continue
            fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.fds.append(fd)
            self.uids.append(uid)
        if len(self.uids) < count:
            self.release()
            raise RuntimeError(f"no free grading uids in {GRADER_UID_BASE + 1}..{GRADER_UID_BASE + 999}: "
                               "too many graders running at once")

    def release(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def _uids_running() -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                out.add(d.stat().st_uid)
            except OSError:
                pass
    return out


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
