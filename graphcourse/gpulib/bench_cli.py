"""What every benchmark's command line shares: its options, the one line that says no CUDA GPU is here, and how it
writes its JSON.

Each benchmark (bench, bench_beyond, bench_debugging, bench_decode_paths, bench_floors, bench_serving) measures on a
GPU and writes its figures into data/; on a machine without CUDA it measures nothing and says, in one line on
stderr, where the recorded figures the lessons show are instead. Its ``main`` is :func:`run` with the part that is
its own: what it measures and the lines it prints after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

NO_CUDA_EXIT = 2
"""The exit code of a benchmark run where torch sees no CUDA GPU (nothing measured, nothing written)."""


def refuse_without_cuda(prog: str, recorded: str) -> int | None:
    """None where torch sees a CUDA GPU; else print why nothing was measured and where `recorded` (the figures the
    lessons show instead) are, and return :data:`NO_CUDA_EXIT`."""
    import torch

    if torch.cuda.is_available():
        return None
    print(f"{prog}: no CUDA GPU here (torch.cuda.is_available() is False), so nothing was measured; run it on a GPU "
          f"machine. {recorded}", file=sys.stderr)
    return NO_CUDA_EXIT


def write_json(path: Any, data: dict[str, Any]) -> None:
    """Write `data` to `path` atomically (a temporary file beside it, renamed over it): an interrupted run loses
    nothing, and a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=1) + "\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's file is 0600: the results file is as readable as any other
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def update_json(path: Any, sections: dict[str, Any], *, new_file: dict[str, Any] | None = None) -> dict[str, Any]:
    """Replace the given top-level sections of a JSON results file, keep every other key, write it atomically;
    returns the whole new content. A missing file starts as `new_file` (default empty). A file that is not a JSON
    object is refused, with how to restore it, and never overwritten."""
    path = Path(path)
    data: dict[str, Any] = dict(new_file or {})
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path} is not valid JSON ({exc}); not overwriting it. Restore it "
                             f"(git checkout -- {path}) and re-run.")
        if not isinstance(data, dict):
            raise SystemExit(f"{path} does not hold a JSON object; not overwriting it. Restore it "
                             f"(git checkout -- {path}) and re-run.")
    data.update(sections)
    write_json(path, data)
    return data


def run(module: str, doc: str | None, argv: Sequence[str] | None,
        measure: Callable[[argparse.Namespace, list[str]], Sequence[str]], *, recorded: str, out: Path,
        out_help: str = "JSON file to write", quick: str | None = None, sections: Sequence[str] = (),
        default_sections: Sequence[str] | None = None) -> int:
    """A benchmark's ``main``: parse ``--out`` (and ``--quick`` where `quick` says what it does, ``--sections``
    where there are `sections`, given comma- or space-separated), refuse without CUDA (see
    :func:`refuse_without_cuda`), then ``measure(args, argv)`` and print the lines it returns.

    ``args.sections`` is the list of sections asked for, in the order given; an unknown one is argparse's
    error, naming the choices."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=(doc or module).splitlines()[0])
    parser.add_argument("--out", type=Path, default=out, help=out_help)
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)
    if sections:
        default = list(default_sections if default_sections is not None else sections)
        parser.add_argument("--sections", nargs="+", default=[",".join(default)], metavar="SECTION",
                            help=f"which to run, comma- or space-separated, from: {', '.join(sections)} "
                                 f"(default: {', '.join(default)})")
    args = parser.parse_args(argv)
    if sections:
        args.sections = [s.strip() for given in args.sections for s in given.split(",") if s.strip()]
        unknown = sorted(set(args.sections) - set(sections))
        if unknown:
            parser.error(f"unknown section(s) {', '.join(unknown)}: choose from {', '.join(sections)}")
    refused = refuse_without_cuda(module, recorded)
    if refused is not None:
        return refused
    for line in measure(args, argv):
        print(line)
    return 0


def driver_version() -> str | None:
    """The NVIDIA driver's version, as nvidia-smi prints it; None where nvidia-smi is missing or says nothing."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        return out.strip().splitlines()[0] if out.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


DECODE_TIMING = ("greedy-decode `tokens` tokens from position 0 after a reset; us_per_token = wall time from the "
                 "first launch to torch.cuda.synchronize() after the last, over tokens")
"""How the decode benchmarks time a path, in the words their provenance records."""


def provenance(module: str, argv: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    """Where and how figures were measured, without the host's name: the GPU (device 0), the driver, CUDA, torch,
    Python, the date and the command (``python -m module argv...``), then the benchmark's own keys in `extra`."""
    import datetime
    import platform
    import shlex

    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "gpu_name": torch.cuda.get_device_name(0),
        "gpu_memory_bytes": props.total_memory,
        "multiprocessors": props.multi_processor_count,
        "driver": driver_version(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": shlex.join(["python", "-m", module, *argv]),
        **extra,
    }
