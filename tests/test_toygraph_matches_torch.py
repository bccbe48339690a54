"""The toy's host-side rules checked against torch itself: views where torch gives views, syncs where it syncs.

On any machine (CPU tensors): indexing, iterating and list() give views that alias the tensor, as in
the toy, so list(out) is no copy; .clone() and .tolist() are. On a CUDA machine (skipped elsewhere):
with torch.cuda.set_sync_debug_mode("error"), the lines the toy counts as syncs raise and the lines it
counts as free do not (https://docs.pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html).
"""

from __future__ import annotations

import pytest

import toygraph as tg
from toygraph import ToyDevice, ToyGraph

torch = pytest.importorskip("torch")


def test_indexing_iterating_and_list_alias_the_tensor_in_torch_as_in_the_toy():
    t = torch.tensor([3.0, 1.0, 4.0])
    index, items, copy_dev, copy_host = t[0], list(t), t.clone(), t.tolist()
    t.copy_(torch.tensor([7.0, 8.0, 9.0]))  # what the next replay does to a static output
    assert index.item() == 7.0 and [v.item() for v in items] == [7.0, 8.0, 9.0]
    assert copy_dev.tolist() == [3.0, 1.0, 4.0] and copy_host == [3.0, 1.0, 4.0]

    dev = ToyDevice()
    b = dev.tensor([3, 1, 4])
    index, items, copy_dev, copy_host = b[0], list(b), b.clone(), b.tolist()
    b.copy_([7, 8, 9])
    assert index.item() == 7 and [v.item() for v in items] == [7, 8, 9]
    assert copy_dev.tolist() == [3, 1, 4] and copy_host == [3, 1, 4]


def test_compares_and_sums_give_tensors_in_torch_and_buffers_in_the_toy():
    t = torch.tensor([3, 1, 4])
    assert isinstance(t == 1, torch.Tensor) and isinstance(sum(t), torch.Tensor) and isinstance(t[0] > 0, torch.Tensor)
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(t == torch.tensor([3, 1, 4]))
    b = ToyDevice().tensor([3, 1, 4])
    assert all(isinstance(x, tg.Buffer) for x in (b == 1, sum(b), b[0] > 0))
    with pytest.raises(tg.InvalidArgumentError, match="ambiguous"):
        bool(b == [3, 1, 4])


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

TORCH_FREE = {
    "x[0]": lambda x: x[0],
    "list(x)": lambda x: list(x),
    "sum(x)": lambda x: sum(x),
    "x == 1": lambda x: x == 1,
    "x[0] > 0": lambda x: x[0] > 0,
    "x[1:]": lambda x: x[1:],
    "x.clone()": lambda x: x.clone(),
}
TORCH_SYNCS = {
    "x.item()": lambda x: x[0].item(),
    "x.tolist()": lambda x: x.tolist(),
    "x.cpu()": lambda x: x.cpu(),
    "bool(x[0] > 0)": lambda x: bool(x[0] > 0),
    "int(x[0])": lambda x: int(x[0]),
    "str(x)": lambda x: str(x),
    "x.nonzero()": lambda x: x.nonzero(),
    "x[x > 0]": lambda x: x[x > 0],
}


@cuda
@pytest.mark.parametrize("name", sorted(TORCH_FREE))
def test_on_cuda_the_lines_the_toy_calls_free_do_not_sync(name):
    x = torch.tensor([3.0, 1.0, 4.0], device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        TORCH_FREE[name](x)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@cuda
@pytest.mark.parametrize("name", sorted(TORCH_SYNCS))
def test_on_cuda_the_lines_the_toy_calls_syncs_do_sync(name):
    x = torch.tensor([3.0, 1.0, 4.0], device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="synchroniz"):
            TORCH_SYNCS[name](x)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_the_toy_agrees_line_by_line():
    """Each torch line above has a toy twin with the same verdict (data-dependent shapes: not in the toy)."""
    toy_free = {"x[0]": lambda b: b[0], "list(x)": list, "sum(x)": sum, "x == 1": lambda b: b == 1,
                "x[0] > 0": lambda b: b[0] > 0, "x[1:]": lambda b: b[1:], "x.clone()": lambda b: b.clone()}
    toy_syncs = {"x.item()": lambda b: b[0].item(), "x.tolist()": lambda b: b.tolist(),
                 "x.cpu()": lambda b: b.cpu(), "bool(x[0] > 0)": lambda b: bool(b[0] > 0),
                 "int(x[0])": lambda b: int(b[0]), "str(x)": str}
    assert set(toy_free) == set(TORCH_FREE)
    assert set(toy_syncs) == set(TORCH_SYNCS) - {"x.nonzero()", "x[x > 0]"}
    for table, syncs in ((toy_free, 0), (toy_syncs, 1)):
        for name, line in table.items():
            dev = ToyDevice()
            line(dev.tensor([3, 1, 4]))
            assert dev.sync_count == syncs, name
            g = ToyGraph(dev)
            if syncs:
                with pytest.raises(tg.CaptureError):
                    with tg.graph(g):
                        line(tg.launch(lambda v: v, dev.tensor([3, 1, 4])))
