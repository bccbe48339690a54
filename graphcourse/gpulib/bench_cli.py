"""What every benchmark's command line shares: the exit code and the one line that says no CUDA GPU is here.

Each benchmark (bench, bench_beyond, bench_debugging, bench_decode_paths, bench_floors, bench_serving) measures on a
GPU and writes its figures into data/; on a machine without CUDA it measures nothing and says, in one line on
stderr, where the recorded figures the lessons show are instead.
"""

from __future__ import annotations

import sys

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
