"""Lesson 11's recording: graphs that go wrong on a real GPU, each scenario in its own process.

``python -m graphcourse.gpulib.bench_debugging [--out data/debugging.json]``

It runs every scenario of :mod:`graphcourse.gpulib.debugging` (three capture failures, a graph whose
input is freed, with and without ``CUDA_LAUNCH_BLOCKING=1`` and under ``compute-sanitizer``, the bisection
of a forty-op capture, a layer-by-layer comparison) and writes what each printed, with provenance,
atomically (a temporary file renamed over the old one), so an interrupted run loses nothing. Nothing here
is timed: the lesson reads messages and values, not speeds.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from . import debugging as dbg
from . import bench_cli
from .bench_beyond import _guard, provenance
from .bench_cli import NO_CUDA_EXIT  # noqa: F401  (the exit code tests read here)

COMMAND = "python -m graphcourse.gpulib.bench_debugging"


def record(argv: Sequence[str]) -> dict[str, Any]:
    """Every scenario's outcome, each guarded so that one failure cannot lose the rest."""
    start = time.perf_counter()
    prov = provenance(argv, gpus=1)
    prov.pop("timing", None)  # nothing here is timed
    prov["command"] = COMMAND  # --out names a scratch file of the GPU machine: not kept
    try:
        from importlib.metadata import version
        prov["cuda_core"] = version("cuda-core")
    except Exception:
        prov["cuda_core"] = None
    data: dict[str, Any] = {"provenance": prov}
    data["capture_failures"] = {name: _guard(name, dbg.capture_failure, name) for name in dbg.CAPTURE_FAILURES}
    data["freed_reused"] = _guard("freed input, block re-used", dbg.freed_input, False)
    data["freed_returned"] = _guard("freed input, segment returned", dbg.freed_input, True)
    data["freed_returned_blocking"] = _guard("... with CUDA_LAUNCH_BLOCKING=1", dbg.freed_input, True, True)
    data["sanitizer"] = _guard("compute-sanitizer", dbg.sanitizer_report)
    data["sanitizer_reused"] = _guard("compute-sanitizer, block re-used", dbg.sanitizer_report, reused=True)
    data["bisect"] = _guard("bisect forty ops", dbg.bisect_forty_ops)
    data["layers"] = _guard("layer by layer", _in_child, "layer_by_layer()")
    data["liveness_check"] = _guard("check_input_liveness", dbg.liveness_check_available)
    data["elapsed_s"] = time.perf_counter() - start
    return data


def _in_child(call: str) -> dict[str, Any]:
    from .bench_beyond import _in_child as run
    return run(f"debugging:{call}")


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: record on the GPU and write JSON, or refuse in one line without CUDA."""
    from ..core.paths import DATA_DIR

    def measure(args, argv: list[str]) -> list[str]:
        data = record(argv)
        bench_cli.update_json(args.out, data)
        return [*(f"{key}: {str(part)[:600]}" for key, part in data.items()),
                f"wrote {args.out} in {data['elapsed_s']:.0f} s"]

    return bench_cli.run(COMMAND.removeprefix("python -m "), __doc__, argv, measure, out=DATA_DIR / "debugging.json",
                         recorded="Lesson 11 shows what data/debugging.json holds.")


if __name__ == "__main__":
    raise SystemExit(main())
