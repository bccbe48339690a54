"""Small helpers lessons share: show an expected error or warning as one readable line, describe this machine."""

from __future__ import annotations

import platform
import re
import sys
import warnings
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def expect_error(*kinds: type[BaseException]) -> Iterator[None]:
    """Run a block that is meant to fail and print its error as `Name: message`, without a traceback."""
    kinds = kinds or (Exception,)
    try:
        yield
    except kinds as exc:  # the point of the cell
        print(f"{type(exc).__name__}: {exc}")
    else:
        print("No error was raised (the lesson expected one here).")


@contextmanager
def show_warnings() -> Iterator[None]:
    """Run a block and print each warning it raises as `Category: message` (no file paths)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:  # torch appends where in its own source it warned: of no use to a learner
        message = re.sub(r"\s*\(Triggered internally at [^)]*\)", "", str(w.message))
        print(f"{w.category.__name__}: {message}")


def cuda_here() -> bool:
    """torch.cuda.is_available(), without importing torch (seconds on a small CPU) where no NVIDIA device exists."""
    import glob

    if sys.platform.startswith("linux") and not glob.glob("/dev/nvidia*"):
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def describe_machine() -> dict[str, str]:
    """What this machine has for the course: Python, torch, CUDA and the GPU's name."""
    info = {"python": sys.version.split()[0], "platform": f"{platform.system()} {platform.machine()}"}
    try:
        import torch
    except ImportError:
        info.update(torch="not installed", cuda="no", gpu="none")
        return info
    info["torch"] = torch.__version__
    if torch.cuda.is_available():
        info.update(cuda=str(torch.version.cuda), gpu=torch.cuda.get_device_name(0))
    else:
        info.update(cuda="no (CPU-only torch build or no GPU)", gpu="none")
    return info


def course_plan(info: dict[str, str], width: int = 100) -> str:
    """One paragraph on what the course will do on the described machine, wrapped to `width` characters."""
    import textwrap

    return textwrap.fill(_course_plan(info), width=width)


def _course_plan(info: dict[str, str]) -> str:
    if info.get("gpu", "none") != "none":
        return (f"A CUDA GPU is here ({info['gpu']}): the lessons capture and replay real CUDA graphs and measure them "
                "live, beside the toy model's prediction and the course's recorded H200 results.")
    if info.get("torch") == "not installed":
        return "torch is missing: run `make lab` from the course folder, which installs it, and open this lesson again."
    return ("No CUDA GPU here: every lesson still runs top to bottom. The toy model (toygraph) runs live, and each "
            "GPU cell says in one line that it shows recorded results, measured by the course's own benchmark on an "
            "NVIDIA H200 and labelled with the GPU and the date.")
