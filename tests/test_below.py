"""Lesson 12 on any machine: the recorded runs of the graph API below PyTorch and every sentence that reads them."""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from graphcourse.core.paths import DATA_DIR, NOTEBOOKS_DIR
from graphcourse.lessons import below

LESSON = NOTEBOOKS_DIR / "12_below_pytorch.ipynb"
BELOW = json.loads((DATA_DIR / "below_torch.json").read_text())
LOOP = json.loads((DATA_DIR / "while_node.json").read_text())


def _text() -> str:
    return "\n".join(c.source for c in nbformat.read(LESSON, as_version=4).cells if c.cell_type == "markdown")


def test_the_recordings_carry_provenance_and_no_paths_of_a_machine():
    for data in (BELOW, LOOP):
        p = data["provenance"]
        assert p["gpu_name"] and p["torch"] and p["cuda_core"] and p["driver"]
        assert not re.search(r"/(root|home|work|tmp)/", json.dumps(data))


def test_three_ways_give_the_same_result_and_the_shapes_the_lesson_describes():
    ways = BELOW["three_ways"]
    assert all(ways[k]["right"] for k in ("torch_capture", "cuda_core_capture", "explicit_nodes"))
    assert ways["cuda_core_capture"]["dot"].count("->") == ways["explicit_nodes"]["dot"].count("->") == 2
    assert (ways["cuda_core_capture"]["nodes"], ways["explicit_nodes"]["nodes"]) == (3, 3)
    assert ways["torch_capture"]["kinds"] == {"kernel": 3, "memcpy": 1}
    assert "torch's has a fourth node, a **memcpy**" in _text()
    assert "scale -> shift -> relu" in below.ways_lines(ways)


def test_the_ways_of_changing_a_graph_are_ordered_as_the_lesson_reads_them_with_ranges_apart():
    u = BELOW["update"]["us_per_change"]
    order = ["device_scalar", "update", "reinstantiate", "torch_recapture"]
    for a, b in zip(order, order[1:]):
        assert u[a]["max"] < u[b]["min"], (a, b, u[a], u[b])
    assert all(BELOW["update"]["right"].values())
    summary = below.update_summary(BELOW["update"])
    assert "(their ranges overlap" not in summary and "costs about 27 µs per change more than an update" in summary
    text = _text()
    assert "Capturing again through torch is the dearest way by far" in text
    assert "updating the executable graph in place cheaper still" in text
    assert "The cheapest way changes no graph at all" in text


def test_upload_saves_time_on_the_first_launch_beyond_the_spread():
    f = BELOW["first_launch"]
    assert f["uploaded_us"]["max"] < f["plain_us"]["min"]
    assert "(ranges overlap" not in below.upload_lines(f)


def test_the_while_node_sentences_match_the_recording():
    runs = {r["batch"]: r for r in LOOP["runs"]}
    one, four = runs[1], runs[4]
    for r in (one, four):
        per_step = r["while_ms"]["median"] / r["while_steps"]
        assert 0.15 < per_step < 0.25, per_step                       # "about 0.2 ms of GPU work"
        extra = r["host_ms"]["median"] / r["while_ms"]["median"] - 1
        assert 0.01 < extra < 0.10, extra                             # "a few percent"
        assert r["while_ms"]["max"] < r["host_ms"]["min"]
        assert r["k_steps"] - r["while_steps"] <= r["k"] - 1          # "up to 7 steps past the end"
    assert max(four["first_eos_per_sequence"]) == 86
    assert (one["k_steps"] - one["while_steps"], four["k_steps"] - four["while_steps"]) == (3, 1)
    assert four["k_ms"]["max"] < four["while_ms"]["min"], "at batch 4, K steps per launch beats the WHILE node"
    assert one["while_ms"]["max"] < one["k_ms"]["min"], "at batch 1 the WHILE node wins"
    for r in (one, four):  # "Per step, the WHILE graph is a little slower than the unrolled one"
        assert r["while_ms"]["median"] / r["while_steps"] > r["k_ms"]["median"] / r["k_steps"]
    text = _text()
    assert ("3 steps at batch 1 (the WHILE node wins), 1 step at batch 4, where one sequence runs to step 86 "
            "(8 steps per launch wins, narrowly)") in text
    assert "Per step, the WHILE graph is a little slower than the unrolled one" in text
    assert "about 0.2 ms of GPU work" in text and "a few percent" in text


def test_readers_say_when_nothing_is_recorded(tmp_path):
    data, label = below.recorded("below_torch", tmp_path / "absent.json")
    assert data is None and "not recorded yet" in label
    for show in (below.ways_lines, below.update_lines, below.upload_lines, below.while_lines):
        assert show(None).startswith("not recorded")
    assert below.update_summary(None) == ""


def test_on_a_gpu_the_three_ways_and_an_update_work():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    pytest.importorskip("cuda.core")
    from graphcourse.gpulib.below_torch import first_launch, three_ways, update_vs_recapture

    ways = three_ways()
    assert all(ways[k]["right"] for k in ("torch_capture", "cuda_core_capture", "explicit_nodes"))
    upd = update_vs_recapture(changes=20, repeats=2)
    assert all(upd["right"].values())
    assert first_launch(repeats=2)["uploaded_us"]["median"] > 0
