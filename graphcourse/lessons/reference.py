"""Results recorded on a GPU by ``python -m graphcourse.gpulib.bench``, for lessons running on a machine without CUDA.

Reading them needs no torch: a CPU-only lesson loads the JSON, labels it with where and when it
was measured (:func:`recorded_label`) and plots or prints it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.paths import reference_path
from ..core.recorded import load_recorded
from ..errors import ReferenceDataError



def default_reference_path() -> Path:
    """data/gpu_reference.json of the course folder (found from this package, not from the working directory)."""
    return reference_path()


def load_reference(path: str | Path | None = None) -> dict[str, Any]:
    """The recorded benchmark as a dictionary; a clear error when the file is missing or is not the benchmark's JSON."""
    file = Path(path) if path is not None else default_reference_path()
    return load_recorded(file, f"python -m graphcourse.gpulib.bench --out {file}")


def section(name: str, data: dict[str, Any] | None = None) -> Any:
    """One section of the recorded results ('chain', 'decode', 'bucketed', 'item_sync', 'costs', 'method'), with a clear error if absent.

    From schema 2 on, every measured figure ``key`` comes with ``key_min`` and ``key_max``: the
    range over interleaved repeats, of which ``key`` is the median (``data['method']`` says how).
    """
    data = load_reference() if data is None else data
    if name not in data:
        known = ", ".join(k for k in data if k != "provenance")
        raise ReferenceDataError(
            f"the recorded results have no section {name!r} (they have: {known}); "
            f"they may come from an older benchmark: re-run `python -m graphcourse.gpulib.bench` on a GPU."
        )
    return data[name]


def recorded_label(data: dict[str, Any] | None = None) -> str:
    """One line naming where and when the figures were measured, e.g. 'recorded on NVIDIA H200, 2026-11-30, torch 2.11.0+cu130'."""
    p = (load_reference() if data is None else data)["provenance"]
    date = str(p.get("date_utc", "unknown date"))[:10]
    return f"recorded on {p.get('gpu_name', 'an unnamed GPU')}, {date}, torch {p.get('torch', '?')}"


LAUNCH_PRICES = (("eager_launch_us", "bare launch      "), ("kernel_in_model_us", "kernel in a model"))


def launch_price_ratio(costs: dict[str, Any]) -> tuple[float, float, float]:
    """Kernel-in-a-model price over bare-launch price: (ratio of the medians, lowest, highest ratio the ranges allow)."""
    bare, model = costs["eager_launch_us"], costs["kernel_in_model_us"]
    return model["median"] / bare["median"], model["min"] / bare["max"], model["max"] / bare["min"]


def launch_price_lines(costs: dict[str, Any]) -> str:
    """Lesson 02's two launch prices, median [min..max], and their ratio read from the same figures."""
    lines = []
    for key, name in LAUNCH_PRICES:
        if key in costs:
            c = costs[key]
            lines.append(f"{name}: {c['median']:5.1f} µs [{c['min']:.1f}..{c['max']:.1f}]  ({c['from']})")
    if all(key in costs for key, _ in LAUNCH_PRICES):
        ratio, lo, hi = launch_price_ratio(costs)
        lines.append(f"a kernel in a model costs {ratio:.2f}x a bare launch (medians; "
                     f"{lo:.2f}x..{hi:.2f}x from the ranges)")
    return "\n".join(lines)


SERVING_COMMAND = "python -m graphcourse.gpulib.bench_serving --out data/gpu_reference.json"


def serving_section(data: dict[str, Any] | None = None, path: str | Path | None = None) -> dict[str, Any]:
    """The "serving" section lesson 09 reads (written by graphcourse.gpulib.bench_serving), with a clear error if absent."""
    if data is None:
        file = Path(path) if path is not None else default_reference_path()
        data = load_recorded(file, SERVING_COMMAND)
    if "serving" not in data:
        raise ReferenceDataError(
            f"the recorded results have no section 'serving' yet (lesson 09's capture sizes, capture cost and "
            f"piecewise figures): run `{SERVING_COMMAND}` on a GPU; it adds that section and leaves the others as they are."
        )
    sec = data["serving"]
    if not isinstance(sec, dict) or "provenance" not in sec:
        raise ReferenceDataError(f"the 'serving' section has no provenance: re-run `{SERVING_COMMAND}` on a GPU.")
    return sec


def serving_label(sec: dict[str, Any]) -> str:
    """'recorded on <GPU>, <date>, torch <version>' for the serving section's own provenance."""
    p = sec["provenance"]
    return (f"recorded on {p.get('gpu_name', 'an unnamed GPU')}, {str(p.get('date_utc', 'unknown date'))[:10]}, "
            f"torch {p.get('torch', '?')}")


BEYOND_COMMAND = "NCCL_NVLS_ENABLE=0 python -m graphcourse.gpulib.bench_beyond --out data/gpu_reference.json"


def beyond_section(name: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Lesson 10's recorded section 'beyond' (one GPU) or 'two_gpu' (NCCL on two GPUs), each with its own provenance.

    A clear :class:`ReferenceDataError` when the section was never recorded (the error says which command
    records it), or when it does not carry a provenance block.
    """
    if name not in ("beyond", "two_gpu"):
        raise ReferenceDataError(f"lesson 10's sections are 'beyond' and 'two_gpu', not {name!r}.")
    data = load_reference() if data is None else data
    if name not in data:
        where = "a machine with two GPUs" if name == "two_gpu" else "a GPU machine"
        raise ReferenceDataError(
            f"section {name!r} is not recorded yet in the GPU results: run `{BEYOND_COMMAND}` on {where} "
            f"and commit data/gpu_reference.json."
        )
    found = data[name]
    if not isinstance(found, dict) or "provenance" not in found:
        raise ReferenceDataError(
            f"section {name!r} of the GPU results has no provenance block, so it did not come from "
            f"`{BEYOND_COMMAND}`: re-run it on a GPU."
        )
    return found


def beyond_label(found: dict[str, Any]) -> str:
    """'recorded on 2 x NVIDIA H200, 2026-11-30, torch 2.11.0+cu130, NCCL 2.27.3' for a section of lesson 10."""
    p = found["provenance"]
    names = p.get("gpu_names") or [p.get("gpu_name", "an unnamed GPU")]
    gpus = f"{len(names)} x {names[0]}" if len(names) > 1 else str(names[0])
    nccl = f", NCCL {p['nccl']}" if p.get("nccl") and len(names) > 1 else ""
    return (f"recorded on {gpus}, {str(p.get('date_utc', 'unknown date'))[:10]}, torch {p.get('torch', '?')}"
            f"{nccl} (`{p.get('command', '?')}`)")
