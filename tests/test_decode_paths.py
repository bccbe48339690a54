"""graphcourse.lessons.decode_paths' plot on a CPU: both panels on one linear axis from 0, medians on the bars, the palette."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
from matplotlib.colors import to_hex  # noqa: E402

from graphcourse.lessons.decode_paths import plot_paths  # noqa: E402
from graphcourse.lessons.palette import color, hatch  # noqa: E402


def _row(path: str, t: float, cpu: float) -> dict:
    return {"path": path, "us_per_token": {"median": t, "min": t - 1, "max": t + 2, "spread": 3},
            "issue_us_per_token": {"median": cpu, "min": cpu - 0.5, "max": cpu + 0.5, "spread": 1}}


DATA = {"provenance": {"gpu_name": "a test GPU", "date_utc": "2026-01-01", "torch": "x", "cuda": "y"},
        "batches": [{"batch": 1, "rows": [_row("graph_k1", 186.1, 21.5), _row("graph_k16", 164.0, 3.0)]},
                    {"batch": 8, "rows": [_row("graph_k1", 350.7, 30.0), _row("graph_k16", 341.3, 10.4)]}]}


def _markdown(lesson: str) -> str:
    """Every markdown cell of notebooks/LESSON.ipynb, joined: the lesson's prose that the tests below read."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / f"{lesson}.ipynb", as_version=4)
    return " ".join(c.source for c in nb.cells if c.cell_type == "markdown")


def test_panels_share_one_linear_axis_from_zero_and_label_each_bar_with_its_median() -> None:
    fig = plot_paths(DATA)
    try:
        left, right = fig.axes[:2]
        assert left.get_xscale() == right.get_xscale() == "linear"
        assert left.get_xlim() == right.get_xlim() and left.get_xlim()[0] == 0
        assert left.get_xlim()[1] > 352.7, "the longest whisker fits"
        texts = {t.get_text() for ax in (left, right) for t in ax.texts}
        assert {"186.1", "164.0", "21.5", "3.0", "350.7", "341.3", "30.0", "10.4"} <= texts
        assert len(left.get_xticks()) >= 4, "readable ticks, not two decades"
        fills = {(to_hex(p.get_facecolor()), p.get_hatch() or "") for p in left.patches}
        assert fills == {(color("kernel").lower(), hatch("kernel")), (color("launch").lower(), hatch("launch"))}
        assert hatch("launch"), "the two bars differ by hatch as well as colour"
    finally:
        plt.close(fig)


def test_shorten_cuts_at_a_word_boundary() -> None:
    from graphcourse.lessons.decode_paths import shorten

    text = "AcceleratorError: CUDA error: an illegal memory access was encountered"
    assert shorten(text, 200) == text
    cut = shorten(text, 40)
    assert len(cut) <= 40 and cut.endswith("…") and text.startswith(cut[:-1]) and text[len(cut) - 1] == " "


def test_bar_effect_lines_come_from_the_data_and_say_what_is_missing() -> None:
    from graphcourse.lessons.decode_paths import bar_effect_lines

    compiled = {"batch": 1, "rows": [_row("graph_k1", 186.1, 21.5), _row("compiled_graph_k1", 163.9, 20.2),
                                     _row("reduce_overhead", 180.1, 179.2)]}
    missing = {**DATA, "batches_error": "RuntimeError: boom\ntrace", "compiled_graphs": [compiled]}
    missing.pop("batches")
    text = bar_effect_lines(missing)
    assert "batch 1: eager and default mode not recorded (RuntimeError: boom)" in text
    assert "fusion, graphs on both sides" in text and "x0.88" in text and "who manages the graph" in text
    assert "batch 8: eager and default mode not recorded" in text and "not recorded either" in text
    full = {**DATA, "batches": [{"batch": 1, "rows": [_row("eager", 600.0, 590.0), _row("graph_k1", 186.1, 21.5),
                                                      _row("compiled_default", 400.0, 380.0)]}]}
    text = bar_effect_lines(full)
    assert "batch 1, fusion without graphs (default mode / eager): time per token x0.67" in text
    assert "batch 1, graphs without fusion (one graph per step / eager): time per token x0.31" in text
    assert "not recorded" not in text.split("batch 8")[0]


def test_cond_capture_line_follows_the_features() -> None:
    from graphcourse.lessons.decode_paths import cond_capture_line

    old = {"torch": "2.11.0+cu130", "cudagraph_conditional_nodes": [], "CUDAGraph.begin_capture_to_if_node": False}
    assert "torch.cond is NOT captured" in cond_capture_line(old, "recorded GPU")
    new = {"torch": "2.13.0", "cudagraph_conditional_nodes": ["if_else_node"],
           "CUDAGraph.begin_capture_to_if_node": True}
    assert "can be captured into IF nodes" in cond_capture_line(new, "here")
    assert cond_capture_line(None, "here") == "here: features not recorded"


def test_lesson_07_reads_the_compiled_graphs_ratios_as_the_recorded_run_says() -> None:
    """Lesson 07's paragraph after the compiled-graphs table: each verdict it states, checked against the data."""
    from graphcourse.lessons import decode_paths as dp

    data = dp.load()
    text = _markdown("07_graphs_by_the_compiler")
    assert "At batch 1 the second ratio's range still lies above 1" in text
    assert "At batch 8 its range straddles 1: no difference beyond the spread" in text
    assert "CPU time per token stayed well under the token's time" in text
    assert dp.ratio_line(data, 1, "reduce_overhead", "compiled_graph_k1", part="compiled_graphs").endswith("slower")
    assert dp.ratio_line(data, 8, "reduce_overhead", "compiled_graph_k1", part="compiled_graphs").endswith(
        "no difference beyond the run-to-run spread")
    for batch in (1, 8):
        row = {r["path"]: r for r in dp.path_rows(data, batch, "compiled_graphs")}["reduce_overhead"]
        assert row["issue_us_per_token"]["max"] < 0.75 * row["us_per_token"]["min"], (batch, row)
    low = dp.ratio_line(data, 1, "reduce_overhead", "compiled_graph_k1", part="compiled_graphs")
    assert 1.0 < float(low.split("= ")[1].split(" ")[0]) < 1.02, "'by about one percent'"


def test_lesson_08_reads_the_cpu_column_as_the_recorded_run_says() -> None:
    """Lesson 08's reading of the CPU column (K steps per graph), each claim checked against the recorded data."""
    from graphcourse.lessons import decode_paths as dp

    data = dp.load()
    text = _markdown("08_control_flow_on_the_device")

    def cpu(batch: int, path: str, part: str = "batches") -> dict:
        return {r["path"]: r for r in dp.path_rows(data, batch, part)}[path]["issue_us_per_token"]

    assert "it falls several-fold at batch 1" in text
    one, sixteen = cpu(1, "graph_k1"), cpu(1, "graph_k16")
    assert one["median"] >= 3 * sixteen["median"] and one["min"] > sixteen["max"], (one, sixteen)
    assert "At batch 8 the first table's fall is smaller than the spread of its one-graph-per-step figure" in text
    one, sixteen = cpu(8, "graph_k1"), cpu(8, "graph_k16")
    assert one["median"] - sixteen["median"] < one["spread"], (one, sixteen)
    assert "shows the fall at batch 8 too, for the compiled kernels captured by hand" in text
    one, sixteen = cpu(8, "compiled_graph_k1", "compiled_graphs"), cpu(8, "compiled_graph_k16", "compiled_graphs")
    assert one["median"] >= 2 * sixteen["median"] and one["min"] > sixteen["max"], (one, sixteen)


def test_lesson_07_says_fusion_changed_the_kernels_not_their_number_as_recorded() -> None:
    """Lesson 07 (issue 21, item 4): 'about as many per step as eager, one fewer', checked against the recorded
    kernel counts of both batch sizes."""
    from graphcourse.lessons import decode_paths as dp

    text = _markdown("07_graphs_by_the_compiler")
    assert "about as many per step as eager, one fewer" in text and "fewer, larger" not in text
    for b in dp.load()["batches"]:
        k = b["kernels"]
        assert k["eager"]["kernels_per_step"] - k["compiled_default"]["kernels_per_step"] == 1, (b["batch"], k)


def test_lesson_07_reads_its_stored_demo_output_on_another_function_call() -> None:
    """Lesson 07 (issue 21, item 3): the bullet on a call to another compiled function says what the stored run of
    the demo printed (the kept output read the other function's value, 11, with no error)."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / "07_graphs_by_the_compiler.ipynb", as_version=4)
    text = _markdown("07_graphs_by_the_compiler")
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "it read *the other function's* result, again with no error" in text
    line = next(ln for ln in printed.splitlines() if "kept across ANOTHER function's call" in ln)
    if "not in this recorded run" not in line:
        assert "no error: the kept output reads 11 (3 expected)" in line, line
