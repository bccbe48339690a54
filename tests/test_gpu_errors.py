"""Without CUDA, every real-GPU entry point of graphcourse.gpulib.graphs refuses with one clear NoCudaError."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graphcourse.gpulib import graphs as gpu
from graphcourse.errors import GraphCourseError, NoCudaError

ROOT = Path(__file__).resolve().parent.parent
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour on a machine without CUDA")


@no_cuda
@pytest.mark.parametrize(
    "call",
    [
        lambda: gpu.capture(lambda x: x * 2, torch.ones(4)),
        lambda: gpu.BucketedRunner(lambda x: x * 2, torch.ones(1, 4), [1, 2, 4], progress=False),
        lambda: gpu.cuda_time_us(lambda: None),
        lambda: gpu.kernel_profile(lambda: None),
    ],
    ids=["capture", "bucketed_runner", "cuda_time_us", "kernel_profile"],
)
def test_gpu_entry_points_raise_no_cuda_error(call) -> None:
    with pytest.raises(NoCudaError) as info:
        call()
    message = str(info.value)
    assert "CUDA GPU" in message and "none here" in message
    assert "recorded" in message, "the error must tell the learner the lesson shows recorded results"


def test_no_cuda_error_is_part_of_the_hierarchy() -> None:
    err = NoCudaError("capturing a CUDA graph")
    assert isinstance(err, GraphCourseError) and isinstance(err, RuntimeError)
    assert str(err).startswith("capturing a CUDA graph needs a CUDA GPU")


def test_require_cuda_matches_torch() -> None:
    if torch.cuda.is_available():
        gpu.require_cuda("anything")  # must not raise
    else:
        with pytest.raises(NoCudaError, match="the decode loop"):
            gpu.require_cuda("the decode loop")


def test_importing_graphcourse_needs_no_torch() -> None:
    code = (
        "import sys, graphcourse, graphcourse.errors, graphcourse.lessons.reference; "
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith('torch.')]; "
        "sys.exit('torch imported: ' + ', '.join(bad[:3]) if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr or done.stdout
