"""A confined kernel's identity and limits: its uid has a name inside the sandbox, and CUDA kernels get room to start.

Runs a short Python through the exact command a confined kernel starts with (``Sandbox.kernel_argv``, the
kernel's own last arguments swapped for ``-c``), so what holds here holds for every learner's kernel.
Needs root and bubblewrap, like the grader itself (skipped otherwise, a failure when root lacks bubblewrap).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphcourse.grading.sandbox import LEARNER_NAME, Limits, Sandbox, UidPool

sys.path.insert(0, str(Path(__file__).resolve().parent / "grading_fixtures"))
from make_fixtures import require_confinement  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBE = ("import getpass, json, os, pwd, resource\n"
         "print(json.dumps({'uid': os.getuid(), 'name': pwd.getpwuid(os.getuid()).pw_name, 'user': getpass.getuser(),\n"
         "                  'home': os.path.expanduser('~'), 'as': resource.getrlimit(resource.RLIMIT_AS)[0],\n"
         "                  'root_name': pwd.getpwuid(0).pw_name}))\n")


def _run(tmp_path: Path, gpu: bool, code: str = PROBE, tmp_mb: int = 1024) -> subprocess.CompletedProcess:
    conf = require_confinement()
    pool = UidPool(1)  # the machine's pool: the sweep below must never meet a grader running beside this test
    os.chmod(tmp_path, 0o755)
    box = Sandbox(conf, 0, tmp_path / "slot-0", ROOT, Limits(memory_mb=2048, gpu_memory_mb=65536, tmp_mb=tmp_mb), gpu=gpu,
                  uid=pool.uids[0])
    try:
        box.prepare()
        argv = box.kernel_argv(sys.executable)
        assert argv[-4:] == ["-m", "ipykernel_launcher", "-f", "{connection_file}"]
        done = subprocess.run(argv[:-4] + ["-c", code.replace("@SOCKETS@", str(box.socket_dir))], capture_output=True,
                              text=True, timeout=120)
        done.socket_tmpfs = box.socket_tmpfs
        return done
    finally:
        box.sweep()
        box.remove()
        pool.release()


def test_the_grading_uid_has_a_name_inside_the_sandbox(tmp_path: Path) -> None:
    done = _run(tmp_path, gpu=False)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["name"] == seen["user"] == LEARNER_NAME and seen["home"] == "/tmp" and seen["root_name"] == "root"
    assert seen["uid"] > 64000
    assert seen["as"] == 2048 * 1024 * 1024, "a kernel without the GPU keeps the tight address-space cap"
    assert not (tmp_path / "slot-0.etc").exists(), "the sandbox's passwd goes with it"


def test_a_gpu_kernel_gets_an_address_space_cuda_can_start_in_but_still_a_cap(tmp_path: Path) -> None:
    done = _run(tmp_path, gpu=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["as"] == 65536 * 1024 * 1024
    hog = _run(tmp_path, gpu=True, code="b = bytearray(100 * 1024**3)")
    assert hog.returncode != 0 and "MemoryError" in hog.stderr, "asking for 100 GB is still refused"


def test_the_sandbox_tmp_has_a_size(tmp_path: Path) -> None:
    code = ("import errno\ntry:\n    open('/tmp/fill', 'wb').write(b'x' * (12 * 1024**2))\n    print('WROTE')\n"
            "except OSError as exc:\n    print('FULL' if exc.errno == errno.ENOSPC else repr(exc))\n")
    done = _run(tmp_path, gpu=False, code=code, tmp_mb=8)
    assert done.stdout.strip() == "FULL", (done.stdout, done.stderr[-1000:])


def test_the_socket_folder_on_the_host_has_a_size(tmp_path: Path) -> None:
    code = ("import errno\ntry:\n    open('@SOCKETS@/fill', 'wb').write(b'x' * (40 * 1024**2))\n    print('WROTE')\n"
            "except OSError as exc:\n    print('FULL' if exc.errno == errno.ENOSPC else repr(exc))\n")
    done = _run(tmp_path, gpu=False, code=code)
    if not done.socket_tmpfs:
        pytest.skip("this machine does not let root mount a tmpfs: the socket folder stays on the disk (docs/grading.md)")
    assert done.stdout.strip() == "FULL", (done.stdout, done.stderr[-1000:])
    assert not (tmp_path / "slot-0").exists(), "unmounted and removed after the kernel"


def test_a_module_written_into_the_sandbox_cannot_be_imported_by_name(tmp_path: Path) -> None:
    """A red-team pass wrote a module into the kernel's working folder (/tmp then) with numpy.savetxt and imported
    it: code the static review never read. The working folder is now an empty one the kernel cannot write, and
    neither it nor /tmp is on sys.path."""
    code = ("import json, os, sys\nout = {'cwd': os.getcwd(), 'path': [p for p in sys.path if p in ('', '.', os.getcwd(), '/tmp')]}\n"
            "open('/tmp/gc_helper_mod.py', 'w').write('X = 1\\n')\n"
            "try:\n    import gc_helper_mod\n    out['import'] = 'imported'\nexcept ImportError:\n    out['import'] = 'refused'\n"
            "try:\n    open('gc_helper_mod2.py', 'w').write('X = 1\\n')\n    out['write'] = 'wrote'\n"
            "except OSError:\n    out['write'] = 'refused'\nprint(json.dumps(out))\n")
    done = _run(tmp_path, gpu=False, code=code)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"cwd": "/grading", "path": [], "import": "refused", "write": "refused"}, seen
