"""Lesson 13 on any machine: the step's byte and FLOP budget, the fused MLP's math, the target's rules."""

from __future__ import annotations

import pytest
import torch

from graphcourse.gpulib import bench_floors, fused_attention, fused_mlp
from graphcourse.gpulib.graphs import GPTConfig, TinyGPT


def test_the_budget_counts_every_weight_the_step_reads_and_one_embedding_row_per_sequence():
    model = TinyGPT()
    dense = sum(p.numel() for name, p in model.named_parameters() if "emb" not in name)
    for batch in (1, 8):
        budget = bench_floors.step_budget(model.config, batch)
        assert budget["weight_bytes"] == 4 * (dense + (batch + 1) * model.config.d_model)
        c = model.config
        assert budget["kv_bytes"] == 4 * 2 * c.n_layers * batch * c.n_heads * c.max_len * c.head_dim
        assert budget["bytes"] == budget["weight_bytes"] + budget["kv_bytes"]
    assert bench_floors.step_budget(GPTConfig(), 8)["flops"] > 7 * bench_floors.step_budget(GPTConfig(), 1)["flops"]


def test_floors_divide_the_budget_by_the_measured_rates():
    budget = {"bytes": 4_000_000, "flops": 2_000_000}
    dev = {"hbm_gbps": {"median": 4000.0}, "l2_gbps": {"median": 10000.0}, "fp32_tflops": {"median": 50.0}}
    assert bench_floors.floors_us(budget, dev) == pytest.approx({"hbm_us": 1.0, "l2_us": 0.4, "flops_us": 0.04})


def test_the_reference_math_is_the_mlp_block_and_keeps_the_tokens():
    model = TinyGPT()
    x = torch.randn(5, model.config.d_model)
    blk = model.blocks[2]
    torch.testing.assert_close(fused_mlp.fused_mlp_reference(blk, x), x + blk.mlp(x), rtol=1e-5, atol=1e-5)
    cache_a, cache_b = model.new_cache(2), model.new_cache(2)
    tok = torch.tensor([3, 7])
    for i in range(6):
        pos = torch.tensor(i)
        plain = model.decode_step(tok, pos, cache_a)
        swapped = model.decode_step(tok, pos, cache_b, mlp_residual=fused_mlp.fused_mlp_reference)
        assert torch.equal(plain, swapped)
        tok = plain


def test_the_reference_attention_writes_the_cache_and_keeps_the_tokens():
    model = TinyGPT()
    cache_a, cache_b = model.new_cache(3), model.new_cache(3)
    tok = torch.tensor([1, 5, 9])
    for i in range(8):
        pos = torch.tensor(i)
        plain = model.decode_step(tok, pos, cache_a)
        swapped = model.decode_step(tok, pos, cache_b, attend=fused_attention.decode_attention_reference)
        assert torch.equal(plain, swapped)
        torch.testing.assert_close(cache_a.k, cache_b.k)
        tok = plain
    assert cache_b.k[:, :, :, 8:].abs().sum() == 0  # nothing written past the last position


def test_the_kernels_refuse_a_cpu_tensor_and_say_what_to_use():
    blk = TinyGPT().blocks[0]
    with pytest.raises(ValueError, match="fused_mlp_reference"):
        fused_mlp.fused_mlp_residual(blk, torch.zeros(1, 256))
    with pytest.raises(ValueError, match="decode_attention_reference"):
        fused_attention.decode_attention(0, torch.zeros(1, 768), torch.tensor([0]), TinyGPT().new_cache(1))


def _row(path, median, lo, hi, equal=1.0):
    return {"path": path, "us_per_token": {"median": median, "min": lo, "max": hi}, "tokens_equal_to_eager": equal}


def test_the_target_takes_the_fastest_path_with_eagers_tokens_only():
    levers = [{"batch": 1, "rows": [_row("eager", 800, 700, 900), _row("reduce_overhead", 160, 159, 161),
                                    _row("graph_k1", 180, 179, 181), _row("wrong_but_fast", 10, 9, 11, equal=0.9),
                                    _row("fused_mlp_graph_k1", 78, 77, 80)]}]
    t = bench_floors.targets(levers)["batch_1"]
    assert t["best_path"] == "fused_mlp_graph_k1" and t["met"]
    assert t["ratio_to_reduce_overhead"] == pytest.approx(78 / 160)
    assert t["ratio_range"] == pytest.approx([77 / 161, 80 / 159])
    levers[0]["rows"][-1] = _row("fused_mlp_graph_k1", 120, 119, 121)
    assert not bench_floors.targets(levers)["batch_1"]["met"]


def test_without_cuda_the_benchmark_measures_nothing_and_says_why(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert bench_floors.main([]) == bench_floors.NO_CUDA_EXIT
    assert "no CUDA GPU here" in capsys.readouterr().err


def test_the_recorded_run_carries_provenance_keeps_eagers_tokens_and_its_targets_follow_from_it():
    import json
    import re

    from graphcourse.core.paths import DATA_DIR

    data = json.loads((DATA_DIR / bench_floors.DATA_FILE).read_text())
    p = data["provenance"]
    assert p["gpu_name"] and p["torch"] and p["driver"] and p["triton"]["triton"]
    assert not re.search(r"/(root|home|work|tmp)/", json.dumps(data))
    assert not any(k.endswith("_error") for k in data), [k for k in data if k.endswith("_error")]
    for b in data["levers"]:
        assert all(r["tokens_equal_to_eager"] == 1.0 for r in b["rows"]), b["batch"]
        assert len(b["rows"][0]["runs_us_per_token"]) == b["repeats"] == bench_floors.REPEATS
    assert data["targets"] == bench_floors.targets(data["levers"])
    for b in data["anatomy"]:
        paths = b["paths"]
        assert paths["fused_both_graph_k1"]["kernels_per_replay"] < paths["graph_k1"]["kernels_per_replay"]
        assert b["budget"] == bench_floors.step_budget(GPTConfig(), b["batch"])
    floors = bench_floors.floors_us(data["anatomy"][0]["budget"], data["device"])
    best = data["anatomy"][0]["paths"]["fused_both_graph_k1"]["span_us"]["median"]
    assert best > 10 * floors["hbm_us"]  # what graphs and these kernels leave: far above the memory floor


def _lesson_text() -> str:
    import nbformat

    from graphcourse.core.paths import NOTEBOOKS_DIR

    nb = nbformat.read(NOTEBOOKS_DIR / "13_what_graphs_dont_fix.ipynb", as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def test_every_figure_lesson_13_reads_in_its_prose_holds_for_the_recording():
    import statistics

    from graphcourse.lessons import floors

    data, _ = floors.recorded()
    text = _lesson_text()
    b1, b8 = (floors._batch(data, "anatomy", b) for b in (1, 8))
    plain = b1["paths"]["graph_k1"]
    durations = [k[2] for k in plain["last_replay"]]
    # the big idea: "about 14 MB", "in about 3 µs", "more than 180 µs", "60 kernels", "about 1 to 3 µs"
    assert "about 14 MB per token" in text
    assert 13.5e6 < b1["budget"]["bytes"] < 15e6
    assert 2.5 < bench_floors.floors_us(b1["budget"], data["device"])["hbm_us"] < 3.5
    assert "more than 180 µs" in text and plain["span_us"]["median"] > 180
    assert "replays 60 kernels" in text and plain["kernels_per_replay"] == 60
    short = [d for d in durations if d < 10]
    assert "about 1 to 3 µs here" in text and sum(0.7 < d < 3.5 for d in short) >= 0.9 * len(short)
    # section 3: "the median is about 2 µs", "60 kernels of 2 µs is already 120 µs", "about 16 µs per layer",
    # "a quarter of a megabyte ... per layer", "a quarter of a microsecond per kernel"
    assert "the median is about 2 µs" in text and 1.5 <= statistics.median(durations) <= 2.5
    attn = [d for name, _, d in plain["last_replay"] if floors.kind_of(name) == "attention (PyTorch, fp32)"]
    assert "about 16 µs per layer" in text and len(attn) == 4 and all(15 < d < 18 for d in attn)
    assert all(d > 3 * statistics.median(durations) for d in attn)  # "several times any other kernel"
    assert 0.2e6 < b1["budget"]["kv_bytes"] / 4 < 0.3e6
    _, gap, _ = floors.toy_twin(data, 1)
    assert "a quarter of a microsecond per kernel" in text and 0.2 < gap < 0.32
    # the L2 size in the words list
    assert "60 MiB on the H200" in text and data["device"]["l2_cache_bytes"] == 60 * 2 ** 20


def test_the_levers_prose_and_takeaways_follow_from_the_recorded_levers():
    from graphcourse.lessons import floors

    data, _ = floors.recorded()
    text = _lesson_text()
    r1, r8 = floors._rows(data, 1), floors._rows(data, 8)
    med = lambda rows, p: rows[p]["us_per_token"]["median"]  # noqa: E731
    # "torch.compile's kernels help at batch 1 and hurt at batch 8"
    assert "help at batch 1 and hurt at batch 8" in text
    assert floors._bought(r1, "graph_k1", "compiled_graph_k1") [0] > 0 and floors._bought(r1, "graph_k1", "compiled_graph_k1")[1]
    assert floors._bought(r8, "graph_k1", "compiled_graph_k1")[0] < 0 and floors._bought(r8, "graph_k1", "compiled_graph_k1")[1]
    compiled8 = floors._kinds(floors._batch(data, "anatomy", 8)["paths"]["compiled_graph_k1"]["last_replay"])
    assert next(iter(compiled8)) == "matrix multiply (cuBLAS)"
    # "the attention kernel is the big lever ... the MLP kernels save less"
    for rows in (r1, r8):
        assert floors._bought(rows, "graph_k1", "fused_attention_graph_k1")[0] > \
            floors._bought(rows, "fused_attention_graph_k1", "fused_both_graph_k1")[0] > 0
        # "roughly halved the tiny GPT's time per token"
        assert 0.4 < med(rows, "fused_both_graph_k1") / med(rows, "graph_k1") < 0.6
    assert "roughly halved" in text
    # "PDL's effect at batch 8 here is inside the run-to-run range"
    assert "PDL's effect at batch 8 here is inside the run-to-run range" in text
    assert not floors._bought(r8, "fused_both_graph_k1", "fused_both_pdl_graph_k1")[1]
    # section 5: "The gap before `ln_fc1_gelu` nearly vanished", "`fc2_residual` started before `ln_fc1_gelu` had
    # ended", "a few microseconds at most, and not the same at both batches"
    assert "The gap before `ln_fc1_gelu` nearly vanished" in text and "`fc2_residual` started before" in text
    for batch in (1, 8):
        plain = floors.gaps_before(data, batch, "fused_both_graph_k1")
        pdl = floors.gaps_before(data, batch, "fused_both_pdl_graph_k1")
        assert pdl["MLP part 1 (Triton)"] < 0.3 * plain["MLP part 1 (Triton)"]
        assert pdl["MLP part 2 (Triton)"] < 0 < plain["MLP part 2 (Triton)"]
    pdl_bought = [floors._bought(r, "fused_both_graph_k1", "fused_both_pdl_graph_k1") for r in (r1, r8)]
    assert "a few microseconds at most, and not the same at both batches" in text
    assert all(abs(saved) < 5 for saved, _ in pdl_bought) and pdl_bought[0][1] != pdl_bought[1][1]
    # section 4: the compiled graph's matrix kernels at batch 8 "each several times longer than the plain graph's"
    k8 = floors._kinds(floors._batch(data, "anatomy", 8)["paths"]["graph_k1"]["last_replay"])
    n_c, t_c = compiled8["matrix multiply (cuBLAS)"]
    n_p, t_p = k8["matrix multiply (cuBLAS)"]
    assert "each several times longer than the plain graph's" in text and t_c / n_c > 2.5 * t_p / n_p
    # Check yourself 1: "60 kernels takes more than 180 µs ... HBM floor for it is 3.5 µs"
    b1 = floors._batch(data, "anatomy", 1)
    assert "60 kernels takes more than 180 µs" in text and b1["paths"]["graph_k1"]["span_us"]["median"] > 180
    assert "3.5 µs" in text and round(bench_floors.floors_us(b1["budget"], data["device"])["hbm_us"], 1) == 3.5


def test_lesson_13s_things_to_try_have_computed_answers():
    from graphcourse.lessons import floors

    import re

    import nbformat

    from graphcourse.core.paths import NOTEBOOKS_DIR

    nb = nbformat.read(NOTEBOOKS_DIR / "13_what_graphs_dont_fix.ipynb", as_version=4)
    items = re.findall(r"^\d\. (.*)$", next(c.source for c in nb.cells if "### Things to try" in c.source), re.M)
    answers = [floors.try_answer(item) for item in items]
    assert len(items) == 4 and all(a and any(ch.isdigit() for ch in a) for a in answers), answers
    assert len(set(answers)) == 4  # each item its own answer
    assert "cuBLAS" in answers[2] and "gap" in answers[3]


def test_reduce_overheads_range_at_batch_1_is_the_widest_of_the_graphed_paths_as_the_lesson_says():
    from graphcourse.lessons import floors

    data, _ = floors.recorded()
    assert "reduce-overhead's own range over the repeats is the widest of the graphed paths" in _lesson_text()
    width = {p: r["us_per_token"]["max"] - r["us_per_token"]["min"] for p, r in floors._rows(data, 1).items()
             if p != "eager"}
    assert max(width, key=width.get) == "reduce_overhead"
