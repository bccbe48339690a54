"""The slider explorers: their pure render functions agree with toygraph, and moving a control redraws the output."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from graphcourse.lessons import widgets as w
from toygraph import (H200_COSTS, BucketedGraphs, ToyDevice, bucket_for, every_n, padding_report, powers_of_two,
                      predicted_speedup, step_time_us, waste_fraction)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _png(explorer: w.Explorer) -> str:
    images = [o["data"]["image/png"] for o in explorer.output.outputs if o["output_type"] == "display_data"]
    assert len(images) == 1, explorer.output.outputs
    return images[0]


def _stdout(explorer: w.Explorer) -> str:
    return "".join(o["text"] for o in explorer.output.outputs if o["output_type"] == "stream")


# --------------------------------------------------------------------------- launch tax


def test_kernel_time_keeps_its_floor_then_grows_with_rows():
    assert w.kernel_us_at_batch(2.0, 1) == pytest.approx(2.0, rel=0.01)
    assert w.kernel_us_at_batch(2.0, 16, saturation_batch=16) == pytest.approx(2.0 * 2**0.5)
    assert w.kernel_us_at_batch(2.0, 2) < 2.0 * 1.1, "nearly flat at small batches"
    with pytest.raises(ValueError, match="batch_size"):
        w.kernel_us_at_batch(2.0, 0)


@pytest.mark.parametrize("n_kernels, kernel_us, launch_us, batch_size",
                         [(40, 1.07, 12.0, 1), (7, 3.0, 5.0, 64), (100, 0.5, 30.0, 512), (1, 20.0, 0.0, 16)])
def test_launch_tax_numbers_are_toygraphs(n_kernels, kernel_us, launch_us, batch_size):
    lt = w.launch_tax(n_kernels, kernel_us, launch_us, batch_size)
    cost = H200_COSTS.with_(launch_us=launch_us, kernel_us=w.kernel_us_at_batch(kernel_us, batch_size))
    assert lt.eager_step_us == pytest.approx(step_time_us(n_kernels, mode="eager", cost=cost))
    assert lt.graph_step_us == pytest.approx(step_time_us(n_kernels, mode="graph", cost=cost))
    assert lt.speedup == pytest.approx(predicted_speedup(n_kernels, cost=cost))
    assert f"eager: {lt.eager_step_us:,.1f} µs" in lt.text
    assert f"speedup: {lt.speedup:.2f}x" in lt.text


def test_launch_bound_step_costs_one_launch_per_kernel():
    lt = w.launch_tax(n_kernels=40, kernel_us=1.0, launch_us=12.0, batch_size=1)
    assert lt.launch_bound
    assert lt.eager_step_us == pytest.approx(40 * 12.0)  # the CPU launches back to back; the GPU waits
    assert lt.graph_step_us == pytest.approx(40 * 1.0, rel=0.01)  # replay runs at the GPU's pace
    assert "CPU's launches" in lt.text


def test_big_batches_make_the_launch_tax_vanish():
    speedups = [w.launch_tax(40, 1.07, 12.0, b).speedup for b in (1, 16, 64, 256, 1024)]
    assert speedups == sorted(speedups, reverse=True)
    assert speedups[0] > 10
    assert speedups[-1] == pytest.approx(1.0, abs=0.01)
    assert not w.launch_tax(40, 1.07, 12.0, 1024).launch_bound


def test_launch_tax_figure_has_an_eager_and_a_graph_panel():
    text, fig = w.render_launch_tax(10, 1.0, 12.0, 1)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles[0].startswith("eager (120.0 µs/step)") and titles[1].startswith("graph (")
    assert text == w.launch_tax(10, 1.0, 12.0, 1).text


def test_moving_the_batch_slider_redraws_the_launch_tax_explorer():
    explorer = w.launch_tax_explorer()
    slider = explorer.controls["batch_size"]
    assert w.BATCH_SLIDER_CLASS in slider._dom_classes
    before_text, before_png, renders = _stdout(explorer), _png(explorer), explorer.renders
    assert before_text == w.launch_tax().text + "\n"  # the toy's default prices, from the recorded benchmark
    slider.value = 512
    assert explorer.renders == renders + 1
    assert _stdout(explorer) == w.launch_tax(batch_size=512).text + "\n"
    assert _stdout(explorer) != before_text and _png(explorer) != before_png
    explorer.controls["launch_us"].value = 3.0
    assert "launch 3.00 µs" in explorer.text


# --------------------------------------------------------------------------- buckets


@pytest.mark.parametrize("text, expected", [("1, 2, 4, 8", (1, 2, 4, 8)), ("8 4 4 1", (1, 4, 8)), (" 3,5 ,", (3, 5))])
def test_parse_buckets_reads_commas_and_spaces(text, expected):
    assert w.parse_buckets(text) == expected


@pytest.mark.parametrize("text, says", [("1, x, 4", "'x' is not a whole number"), ("", "empty"), ("  , ", "empty"),
                                        ("0, 4", "at least 1"), ("2.5, 4", "'2.5' is not a whole number")])
def test_parse_buckets_says_what_is_wrong(text, says):
    with pytest.raises(w.BucketTextError, match=says):
        w.parse_buckets(text)


def test_policies_are_toygraphs_bucket_lists():
    assert w.buckets_for_policy("powers of two", 64) == powers_of_two(64)
    assert w.buckets_for_policy("every 8 (vLLM)", 64) == every_n(8, 64)
    assert w.buckets_for_policy("custom list", 64, "4, 2") == (2, 4)
    with pytest.raises(w.BucketTextError, match="unknown bucket policy"):
        w.buckets_for_policy("fibonacci", 64)


@pytest.mark.parametrize("policy", w.POLICIES)
@pytest.mark.parametrize("batch_size", [1, 17, 33, 64])
def test_bucket_choice_agrees_with_toygraph(policy, batch_size):
    choice = w.bucket_choice(batch_size, policy, "1, 8, 32", max_batch=64)
    buckets = w.buckets_for_policy(policy, 64, "1, 8, 32")
    assert choice.bucket == bucket_for(batch_size, buckets)
    if choice.bucket is None:
        assert choice.waste_fraction == 0.0 and "runs eagerly" in choice.text
    else:
        assert choice.waste_fraction == pytest.approx(waste_fraction(batch_size, choice.bucket))
        assert f"batch {batch_size} -> bucket {choice.bucket}: {choice.bucket - batch_size} padding rows" in choice.text
    assert choice.overall == padding_report(range(1, 65), buckets)
    assert choice.memory_bytes == BucketedGraphs(list(w.TOY_STEP), buckets, device=ToyDevice()).memory_bytes


def test_waste_by_batch_marks_eager_sizes_and_zero_at_buckets():
    choice = w.bucket_choice(5, "custom list", "4, 16", max_batch=20)
    waste = choice.waste_by_batch
    assert waste[3] == 0.0 and waste[15] == 0.0  # batches 4 and 16 fill their bucket
    assert waste[4] == pytest.approx(11 / 16)  # batch 5 in bucket 16
    assert all(math.isnan(x) for x in waste[16:])  # 17..20 run eagerly
    assert choice.overall.eager_batches == 4


def test_bigger_buckets_cost_more_toy_memory():
    memory = w.bucket_choice(17, "powers of two").memory_bytes
    sizes = sorted(memory)
    assert [memory[b] for b in sizes] == sorted(memory[b] for b in sizes)
    assert memory[64] == 64 * memory[1]


def test_moving_the_batch_slider_redraws_the_bucket_explorer():
    explorer = w.bucket_explorer(batch_size=17)
    slider = explorer.controls["batch_size"]
    assert w.BATCH_SLIDER_CLASS in slider._dom_classes
    assert "batch 17 -> bucket 32" in _stdout(explorer)
    before_png = _png(explorer)
    slider.value = 33
    assert "batch 33 -> bucket 64: 31 padding rows" in _stdout(explorer)
    assert _png(explorer) != before_png
    explorer.controls["policy"].value = "every 8 (vLLM)"
    assert "batch 33 -> bucket 40: 7 padding rows" in explorer.text


@pytest.mark.parametrize("bad", ["1, x, 4", ""])
def test_bad_custom_buckets_show_a_message_not_a_traceback(bad):
    explorer = w.bucket_explorer()
    explorer.controls["policy"].value = "custom list"
    explorer.controls["custom"].value = bad
    outputs = explorer.output.outputs
    assert [o["output_type"] for o in outputs] == ["stream"]  # the message alone: no figure, no error output
    assert "Traceback" not in outputs[0]["text"]
    assert "Type batch sizes separated by commas" in outputs[0]["text"] or "is empty" in outputs[0]["text"]
    explorer.controls["custom"].value = "1, 2, 4"  # fixing the text brings the plot back
    assert "buckets: 1, 2, 4 (3 graphs)" in explorer.text
    _png(explorer)


def test_explorer_repr_is_short_and_names_the_values():
    assert repr(w.bucket_explorer(batch_size=3)) == (
        "Explorer(batch_size=3, policy='powers of two', custom='1, 2, 4, 8, 16, 32, 64')")


# --------------------------------------------------------------------------- GPU cells: live or recorded, and their plots

FAKE_CHAIN = {"op": "x.add_(1.0)", "rows": [
    {"kernels": n, "eager_us_per_kernel": 8.0 + 2.0 / n, "graph_us_per_node": 1.0 + 2.5 / n, "speedup": (8.0 + 2.0 / n) / (1.0 + 2.5 / n)}
    for n in (1000, 1, 10, 100)]}
FAKE_BUCKETED = {
    "buckets": [1, 2, 4], "stream": {"n_batches": 3, "seed": 0, "min": 1, "max": 4, "rows": 6},
    "eager_rows_per_s": 100.0, "graph_rows_per_s": 400.0, "speedup": 4.0,
    "padding": {"useful_rows": 6, "padded_rows": 1, "waste_fraction": 1 / 7, "eager_batches": 0},
    "memory_per_bucket": [{"bucket": b, "shared_pool_reserved_bytes": 2**20 * (b == 4) * 4,
                           "private_pool_reserved_bytes": 2**21} for b in (4, 1, 2)],
}
FAKE_REFERENCE = {"provenance": {"gpu_name": "Fake GPU 9000", "date_utc": "2031-02-03T04:05:06Z", "torch": "9.9"},
                  "chain": FAKE_CHAIN, "bucketed": FAKE_BUCKETED}


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(w, "cuda_here", lambda: False)


def test_recorded_figures_are_read_and_labelled(no_cuda, monkeypatch, tmp_path, capsys):
    import json

    from graphcourse.lessons import reference

    path = tmp_path / "gpu_reference.json"
    path.write_text(json.dumps(FAKE_REFERENCE))
    monkeypatch.setattr(reference, "default_reference_path", lambda: path)
    figures = w.live_or_recorded("chain", measure=lambda: pytest.fail("measured without a GPU"))
    assert figures.available and not figures.live
    assert figures.data == FAKE_CHAIN
    assert figures.label == "recorded on Fake GPU 9000, 2031-02-03, torch 9.9"
    assert capsys.readouterr().out.strip() == "No CUDA GPU here: this cell shows results recorded on a GPU by the course's benchmark."


def test_missing_recorded_figures_say_so_in_one_line_without_a_path(no_cuda, monkeypatch, tmp_path, capsys):
    from graphcourse.lessons import reference

    monkeypatch.setattr(reference, "default_reference_path", lambda: tmp_path / "nowhere" / "gpu_reference.json")
    figures = w.live_or_recorded("chain", measure=lambda: pytest.fail("measured without a GPU"))
    assert not figures.available
    out = capsys.readouterr().out
    assert w.NO_RECORDED_RESULTS in out and str(tmp_path) not in out
    assert "Traceback" not in out


def test_a_missing_section_is_a_message_not_a_traceback(no_cuda, monkeypatch, tmp_path, capsys):
    import json

    from graphcourse.lessons import reference

    path = tmp_path / "gpu_reference.json"
    path.write_text(json.dumps({"provenance": FAKE_REFERENCE["provenance"]}))
    monkeypatch.setattr(reference, "default_reference_path", lambda: path)
    assert not w.live_or_recorded("bucketed", measure=dict).available
    assert "no section 'bucketed'" in capsys.readouterr().out


def test_with_a_gpu_the_cell_measures_live(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(w, "cuda_here", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Fake GPU 9000")
    figures = w.live_or_recorded("chain", measure=lambda: FAKE_CHAIN)
    assert figures.live and figures.data is FAKE_CHAIN
    assert figures.label.startswith("measured live on Fake GPU 9000, ")
    assert "measuring live" in capsys.readouterr().out


def test_cuda_here_matches_torch_on_this_machine():
    import torch

    assert w.cuda_here() == torch.cuda.is_available()


def test_chain_plot_puts_measurements_beside_the_toy():
    from graphcourse.lessons.plots import plot_chain_vs_toy

    cost = H200_COSTS.with_(launch_us=8.0, kernel_us=1.0)
    fig = plot_chain_vs_toy(FAKE_CHAIN, "recorded on Fake GPU", cost=cost)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    lines.update({bars.get_label(): bars.lines[0] for bars in fig.axes[0].containers})  # measured: error bars
    ns = [1, 10, 100, 1000]
    assert list(lines["eager, measured"].get_xdata()) == ns  # sorted by chain length
    assert list(lines["graph replay, measured"].get_ydata()) == [1.0 + 2.5 / n for n in ns]
    assert list(lines["eager, toy prediction"].get_ydata()) == pytest.approx([step_time_us(n, cost=cost) / n for n in ns])
    assert list(lines["graph replay, toy prediction"].get_ydata()) == pytest.approx(
        [step_time_us(n, mode="graph", cost=cost) / n for n in ns])
    assert "recorded on Fake GPU" in fig.axes[0].get_title()


def test_bucketed_plot_shows_throughput_padding_and_memory_per_bucket():
    from graphcourse.lessons.plots import plot_bucketed_runner

    fig = plot_bucketed_runner(FAKE_BUCKETED, "recorded on Fake GPU")
    speed, waste, memory = fig.axes
    assert [p.get_height() for p in speed.patches] == [100.0, 400.0]
    assert "4.0x eager" in speed.get_title()
    assert [p.get_height() for p in waste.patches] == [6, 1]
    assert [t.get_text() for t in memory.get_xticklabels()] == ["1", "2", "4"]  # sorted by bucket
    heights = [p.get_height() for p in memory.patches]
    assert heights == [2.0, 2.0, 2.0, 0.0, 0.0, 4.0]  # private pools, then the shared pool, in MiB


def test_launch_tax_reads_as_rounded_figures():
    from graphcourse.lessons.widgets import launch_tax

    text = repr(launch_tax(40, 1.0, 12.0))
    assert text == "LaunchTax(40 kernels of 1.00 µs at batch 1, launch 12.00 µs: eager 480.0 µs, graph 40.0 µs, 12.00x)"


def test_batch_model_is_nearly_flat_until_saturation_and_fitted_per_kernel() -> None:
    assert w.saturation_curve(4, 64) < 1.01 and w.saturation_curve(640, 64) == pytest.approx(10.05, rel=0.01)
    # per-kernel times: a step's kernel count may change with the batch, so the fit divides it out
    rows = [{"batch": 1, "kernels": 10, "kernel_time_us": 100.0},
            {"batch": 40, "kernels": 20, "kernel_time_us": 200.0 * 2**0.5},
            {"batch": 80, "kernels": 10, "kernel_time_us": 100.0 * 5**0.5}]
    assert w.fit_saturation_batch(rows) == pytest.approx(40.0, rel=0.02)
    with pytest.raises(ValueError, match="batch-1 row"):
        w.fit_saturation_batch(rows[1:])
    assert 1 < w.SATURATION_BATCH < 10_000 and w.SATURATION_SOURCE


def test_launch_tax_text_flags_batches_beyond_the_measured_ones() -> None:
    if not w.MEASURED_MAX_BATCH:
        pytest.skip("no recorded decode rows here")
    assert "extrapolation" in w.launch_tax(batch_size=w.MEASURED_MAX_BATCH + 1).text
    assert "extrapolation" not in w.launch_tax(batch_size=w.MEASURED_MAX_BATCH).text
