"""Lesson 09's pure parts: the engines' size rules, the padded-size table, waste, the chooser, the section reader
and the benchmark's section update; the padded replay and piecewise split run without graphs on a CPU."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

from graphcourse.errors import ReferenceDataError
from graphcourse.lessons import serving as S
from graphcourse.lessons.reference import serving_section
from toygraph import InvalidArgumentError
from toygraph.buckets import EagerFallbackWarning, bucket_for
from toygraph.serving import AboveLargestSizeError, PaddedSizeTable, ToyCaptureCost, expected_waste, padded_size_table


def test_vllm_default_sizes_follow_the_rule_read_in_set_cudagraph_sizes():
    sizes = S.vllm_default_sizes()  # H200 defaults: max_num_seqs 1024 -> largest min(2048, 512) = 512
    assert sizes[:4] == (1, 2, 4, 8)
    assert [b for b in sizes if 8 <= b < 256] == list(range(8, 256, 8))
    assert [b for b in sizes if b >= 256] == list(range(256, 513, 16))
    assert len(sizes) == 3 + 31 + 17 == 51
    assert S.vllm_default_sizes(max_num_seqs=128)[-1] == 256           # min(128 * 2, 512)
    assert S.vllm_default_sizes(max_num_seqs=1024, blackwell=True)[-1] == 1024
    assert S.vllm_default_sizes(max_num_seqs=4) == (1, 2, 4, 8)        # largest 8
    assert S.vllm_default_sizes(max_num_seqs=256, max_num_batched_tokens=100)[-1] == 100  # the token cap, appended
    assert S.vllm_default_sizes(performance_mode="interactivity")[:33] == tuple(range(1, 33)) + (40,)
    with pytest.raises(ValueError):
        S.vllm_default_sizes(performance_mode="fast")


def test_vllm_default_sizes_add_the_uniform_decode_sizes_of_speculative_decoding():
    """By hand from _set_cudagraph_sizes at 000fc94b, query length 3 (two speculative tokens)."""
    # max_num_seqs 20: largest min(20 * 3 * 2, 512) = 120; request counts 1, 2, 4, 8, 16 and 20 itself,
    # times 3: 3, 6, 12, 24, 48, 60; the grid 1, 2, 4, 8..120 lacks 3, 6, 12 and 60
    assert S.vllm_default_sizes(20, 8192, decode_query_len=3) == (
        1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 48, 56, 60, 64, 72, 80, 88, 96, 104, 112, 120)
    # max_num_seqs 64: largest 384; 3 * (1, 2, 4, 8..64) adds 3, 6, 12 to the 3 + 31 + 9 grid sizes
    sizes = S.vllm_default_sizes(64, 8192, decode_query_len=3)
    assert sizes[:7] == (1, 2, 3, 4, 6, 8, 12) and sizes[-1] == 384 and len(sizes) == 46
    # a token cap of 100: the grid stops at 96, 100 is appended, and uniform sizes above 100 are dropped
    capped = S.vllm_default_sizes(64, 100, decode_query_len=3)
    assert capped == (1, 2, 3, 4, 6, 8, 12) + tuple(range(16, 97, 8)) + (100,)
    assert S.vllm_default_sizes(decode_query_len=1) == S.vllm_default_sizes()  # plain decode: no extra sizes
    with pytest.raises(ValueError):
        S.vllm_default_sizes(decode_query_len=0)


def test_vllm_batch_defaults_by_gpu():
    assert S.vllm_batch_defaults(140, "NVIDIA H200") == (1024, 8192)
    assert S.vllm_batch_defaults(80, "NVIDIA A100-SXM4-80GB") == (256, 2048)
    assert S.vllm_batch_defaults(140, "NVIDIA H200", usage="llm") == (1024, 16384)


def test_sglang_default_sizes_follow_generate_cuda_graph_batch_sizes():
    sizes = S.sglang_default_sizes(256)
    assert sizes == (1, 2, 4, 8, 12) + tuple(range(16, 257, 8))
    big = S.sglang_default_sizes(1024)
    assert [b for b in big if 256 < b < 512] == list(range(272, 512, 16))
    assert [b for b in big if b >= 512] == list(range(512, 1025, 32))
    assert S.sglang_default_sizes(16, disable_padding=True) == tuple(range(1, 17))
    assert S.sglang_default_sizes(64, speculative=True)[:9] == (1, 2, 3, 4, 5, 6, 7, 8, 10)
    assert S.sglang_default_max_bs(143156) == 256 and S.sglang_default_max_bs(143156, tp_size=8) == 512
    assert S.sglang_default_max_bs(None) == 160 and S.sglang_default_max_bs(16 * 1024) == 8
    old = S.sglang_sizes_2025(143156)
    assert old[:5] == (1, 2, 4, 8, 16) and old[-1] == 256
    assert S.sglang_sizes_2025(40960)[-1] == 160


def test_padded_size_table_matches_bucket_for_and_vllms_loop():
    for sizes in [(1, 2, 4, 8), S.vllm_default_sizes(), (3, 5, 17)]:
        table = padded_size_table(sizes)
        assert table[0] == 0 and len(table) == max(sizes) + 1
        for b in range(1, max(sizes) + 1):
            assert table[b] == bucket_for(b, sizes)


def test_lookup_raises_or_dispatches_eager_above_the_largest_size():
    t = PaddedSizeTable([1, 2, 4, 8])
    assert t.padded_size(5) == 8 and t.dispatch(5).padded_rows == 3
    with pytest.raises(AboveLargestSizeError, match="eagerly"):
        t.padded_size(9)
    d = t.dispatch(9)
    assert (d.mode, d.size, d.padded_rows) == ("eager", 9, 0)
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(InvalidArgumentError):
            t.dispatch(bad)


def test_expected_waste_by_hand():
    w = expected_waste([1, 2, 4, 8], {3: 1.0, 5: 1.0, 16: 2.0})
    # per step: useful (3 + 5 + 2 * 16) / 4 = 10; padded (1 + 3) / 4 = 1; half the steps eager
    assert math.isclose(w.useful_rows, 10.0) and math.isclose(w.padded_rows, 1.0) and w.eager_share == 0.5
    assert math.isclose(w.waste_fraction, 1.0 / (2.0 + 1.0))   # padded / (graphed useful 8/4 + padded)
    assert expected_waste(range(1, 9), {3: 1, 7: 1}).waste_fraction == 0.0
    with pytest.raises(InvalidArgumentError):
        expected_waste([1, 2], {})
    with pytest.raises(InvalidArgumentError):
        expected_waste([1, 2], {1: -1.0})


def test_denser_lists_waste_less_on_the_chat_mix():
    d = S.chat_batch_distribution(256)
    assert math.isclose(sum(d.values()), 1.0) and d[1] > d[2] > d[100]
    rows = {r.name: r for r in S.tradeoff_rows(d, None)}
    assert rows["every size"].waste.waste_fraction == 0.0
    assert rows["every 4"].waste.waste_fraction < rows["vLLM default"].waste.waste_fraction
    assert rows["vLLM default"].waste.waste_fraction < rows["powers of two"].waste.waste_fraction
    assert all(r.capture_s is None for r in rows.values())


def _recorded():
    lists = S.candidate_lists(256)
    rows = []
    for i, (name, sizes) in enumerate(lists.items()):
        cost = {"capture_s": 0.01 * len(sizes), "capture_s_min": 0.009 * len(sizes),
                "capture_s_max": 0.011 * len(sizes), "free_drop_bytes": 2**20 * (8 + len(sizes))}
        private = dict(cost, free_drop_bytes=2**21 * len(sizes))
        rows.append({"name": name, "sizes": list(sizes), "shared": cost, "private": private})
    return {"lists": rows}


def test_choose_sizes_within_budget():
    rows = S.tradeoff_rows(S.chat_batch_distribution(256), _recorded())
    assert S.choose_sizes(rows).name == "every size"
    best = S.choose_sizes(rows, memory_budget_bytes=50 * 2**20)  # <= 42 sizes fit
    assert best.name == "SGLang default"
    assert S.choose_sizes(rows, capture_budget_s=0.2).name == "every 16"
    with pytest.raises(ValueError, match="cheapest is 'powers of two'"):
        S.choose_sizes(rows, memory_budget_bytes=2**20)


def test_render_tradeoff_without_and_with_recorded_figures():
    import matplotlib.pyplot as plt

    text, fig = S.render_tradeoff(64, S.chat_batch_distribution(), None)
    assert "not recorded" in text and "no list fits" in text
    plt.close(fig)
    text, fig = S.render_tradeoff(50, S.chat_batch_distribution(), _recorded(), "test")
    assert "'SGLang default' (36 sizes)" in text
    plt.close(fig)


def test_fit_capture_cost_recovers_a_line():
    rows = [{"size": b, "capture_ms": 5 + 0.1 * b, "private_pool_bytes": 1000 * b} for b in (1, 8, 64, 256)]
    c = S.fit_capture_cost(rows)
    assert math.isclose(c.capture_ms, 5, abs_tol=1e-6) and math.isclose(c.capture_ms_per_row, 0.1, rel_tol=1e-6)
    assert c.pool_bytes_per_row == 1000
    toy = ToyCaptureCost(capture_ms=10, capture_ms_per_row=0, pool_bytes_per_row=100, output_bytes_per_row=1)
    assert toy.shared_pool_bytes([1, 2, 4]) == 400 + 7 < toy.private_pools_bytes([1, 2, 4]) == 707
    assert math.isclose(toy.capture_s([1, 2, 4]), 0.03)


def test_serving_section_reader_gives_a_clear_error_when_missing(tmp_path):
    f = tmp_path / "ref.json"
    f.write_text(json.dumps({"provenance": {"gpu_name": "X"}, "decode": {}}))
    with pytest.raises(ReferenceDataError, match="bench_serving"):
        serving_section(path=f)
    with pytest.raises(ReferenceDataError, match="provenance"):
        serving_section({"provenance": {}, "serving": {"lists": []}})


def test_bench_update_section_keeps_other_sections(tmp_path):
    from graphcourse.gpulib.bench_serving import update_section

    f = tmp_path / "ref.json"
    original = {"schema": 2, "provenance": {"gpu_name": "H"}, "decode": {"rows": [1, 2]}, "serving": {"old": 1}}
    f.write_text(json.dumps(original))
    new = {"provenance": {"gpu_name": "H200"}, "lists": []}
    update_section(f, new)
    data = json.loads(f.read_text())
    assert data["serving"] == new
    assert {k: v for k, v in data.items() if k != "serving"} == {k: v for k, v in original.items() if k != "serving"}
    assert [p.name for p in tmp_path.iterdir()] == ["ref.json"]  # no temporary file left
    fresh = tmp_path / "new.json"
    update_section(fresh, new)
    assert serving_section(path=fresh) == new
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SystemExit):
        update_section(bad, new)
    assert bad.read_text() == "{not json"


def test_bench_refuses_without_cuda(capsys, tmp_path):
    from graphcourse.gpulib.bench_serving import NO_CUDA_EXIT, main

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["--out", str(tmp_path / "x.json")]) == NO_CUDA_EXIT
    assert "no CUDA GPU" in capsys.readouterr().err and not (tmp_path / "x.json").exists()


# ----------------------------------------------------------------- the GPU library's arithmetic, without graphs


def _model():
    from graphcourse.gpulib.graphs import GPTConfig, TinyGPT

    return TinyGPT(GPTConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=2, max_len=16), seed=3)


def test_piecewise_split_equals_the_decode_step():
    from graphcourse.gpulib.graphs import as_device_position
    from graphcourse.gpulib.serving import PiecewiseDecoder, clone_cache, piecewise_step_eager

    m = _model()
    pos = as_device_position(2, "cpu")
    tokens, slots = torch.tensor([3, 9, 11]), torch.tensor([2, 0, 1])
    a, b = m.new_cache(4), m.new_cache(4)
    assert torch.equal(piecewise_step_eager(m, tokens, pos, a, slots), m.decode_step(tokens, pos, b, slots=slots))
    assert torch.equal(a.k, b.k) and torch.equal(a.v, b.v)
    c = clone_cache(b)
    pw = PiecewiseDecoder(m, m.new_cache(4), pos, 3, capture=False)
    pw.cache.k.copy_(c.k), pw.cache.v.copy_(c.v)
    assert torch.equal(pw(tokens, slots), m.decode_step(tokens, pos, c, slots=slots))
    assert pw.graph_count == 3


def test_serving_decoder_pads_to_the_table_and_writes_only_the_scratch_slot():
    from graphcourse.gpulib.serving import ServingDecoder, clone_cache, kv_rows_touched

    m = _model()
    server = ServingDecoder(m, [1, 2, 4, 8], position=2, capture=False)
    server.cache.k.normal_(generator=torch.Generator().manual_seed(0))
    server.cache.v.normal_(generator=torch.Generator().manual_seed(1))
    tokens, slots = torch.tensor([1, 2, 3, 4, 5]), torch.arange(5)
    reference = clone_cache(server.cache)
    expected = m.decode_step(tokens, server.pos, reference, slots=slots)
    before = clone_cache(server.cache)
    got = server(tokens, slots)
    assert torch.equal(got, expected) and server.dispatched[-1] == ("graph", 5, 8)
    assert kv_rows_touched(before, server.cache) == [0, 1, 2, 3, 4, server.cache.pad_slot]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        server(torch.arange(3), torch.tensor([0, 1, 2]))
    assert not caught
    big = ServingDecoder(m, [1, 2], max_batch=4, capture=False)
    with pytest.warns(EagerFallbackWarning, match="above the largest captured size"):
        out = big(torch.tensor([1, 2, 3]), torch.tensor([0, 1, 2]))
    assert out.shape == (3,) and big.dispatched[-1] == ("eager", 3, 3)


# ----------------------------------------------------------------- the benchmark's section, built without a GPU


class _FakeCaptured:
    def __init__(self, sizes, shared, order):
        from graphcourse.gpulib.serving import ListMemory

        sizes = sorted(sizes)
        n = len(sizes)
        self.capture_s = 0.01 * n
        self.per_size_s = {b: 0.005 + 1e-5 * b for b in sizes}
        self.per_size_pool_bytes = {} if shared else {b: 2**21 + 4096 * b for b in sizes}
        drop = (2**21 + 4096 * sizes[-1] + 512 * n) if shared else sum(2**21 + 4096 * b for b in sizes)
        if shared and order == "smallest_first":
            drop += 2**20
        self.memory = ListMemory(drop, drop // 2, drop, drop)

    def release(self):
        pass


def _fake_capture_list(model, cache, pos, sizes, *, order="largest_first", shared_pool=True, measure_memory=True,
                       **_):
    return _FakeCaptured(sizes, shared_pool, order)


def _section(monkeypatch):
    import functools

    from graphcourse.gpulib import bench_serving as B

    monkeypatch.setattr(B, "provenance", lambda argv, quick: {"gpu_name": "fake GPU", "date_utc": "2026-11-30",
                                                              "torch": torch.__version__, "command": "test"})
    monkeypatch.setattr(B, "bench_lists", functools.partial(B.bench_lists, device="cpu",
                                                            capture_list=_fake_capture_list))
    monkeypatch.setattr(B, "bench_piecewise", functools.partial(
        B.bench_piecewise, device="cpu", capture=False, timer=lambda fn, iters: 100.0 + iters))
    monkeypatch.setattr(B, "padded_replay_fact", functools.partial(B.padded_replay_fact, "cpu", False))
    return B.run_section(["--out", "x.json"], quick=False)


def test_the_benchmark_section_has_what_the_lesson_reads(monkeypatch, tmp_path):
    from graphcourse.gpulib.bench_serving import summary_lines, update_section

    sec = _section(monkeypatch)
    assert {r["name"] for r in sec["lists"]} == set(S.candidate_lists(256))
    for r in sec["lists"]:
        for mode in ("shared", "private", "shared_smallest_first"):
            assert {"capture_s", "capture_s_min", "capture_s_max", "free_drop_bytes_min"} <= set(r[mode])
    fact = sec["padded_replay"]
    assert fact["tokens_match_eager"] and fact["tokens_match_eager_padded_batch"] and fact["padded_to"] == 8
    assert fact["kv_rows_match_eager"]
    assert fact["slots_written"] == [0, 1, 2, 3, 4, 8] and fact["live_slots_untouched"] == [5, 6, 7]
    rows = sec["piecewise"]["rows"]
    assert [r["batch"] for r in rows] == [1, 8] and all(r["piecewise_matches_eager"] for r in rows)
    assert len(sec["per_size"]) == 256 and sec["per_size"][0]["private_pool_bytes"] > 0
    summary_lines(sec)
    # the lesson's readers, on the section as the file will hold it
    f = tmp_path / "ref.json"
    f.write_text(json.dumps({"provenance": {"gpu_name": "H200"}, "decode": {}}))
    update_section(f, sec)
    rec = serving_section(path=f)
    table = S.tradeoff_rows(S.chat_batch_distribution(256), rec)
    assert all(r.capture_s is not None and r.shared_bytes < r.private_bytes for r in table if r.n_sizes > 1)
    lines = S.capture_mode_lines(rec)
    assert len(lines) == 1 + 7 and "every size" in lines[-1]
    assert "one pool largest first took less memory than a pool per graph" in S.capture_mode_summary(rec)
    assert "same as eager" in S.piecewise_lines(rec)[1]
    assert S.piecewise_summary(rec).startswith("batch 1: piecewise took no different (the ranges overlap) from one")
    row = dict(rec["piecewise"]["rows"][0], full_graph_us=50.0, full_graph_us_min=45.0, full_graph_us_max=55.0)
    sec2 = {"piecewise": {"rows": [row]}}
    assert "more time than one full graph" in S.piecewise_summary(sec2)
    assert S.piecewise_summary(None) == "not recorded yet"
    assert S.fit_capture_cost(rec["per_size"]).pool_bytes_per_row == 4096
    import matplotlib.pyplot as plt

    text, fig = S.render_tradeoff(64, S.chat_batch_distribution(256), rec, "fake")
    plt.close(fig)
    assert "within 64 MiB (one shared pool, largest first)" in text
    text, fig = S.render_tradeoff(64, S.chat_batch_distribution(256), rec, "fake", capture_budget_s=0.2)
    plt.close(fig)
    assert "within 64 MiB (one shared pool, largest first) and 0.20 s of capture: 'every 16'" in text  # 0.01 s/size
    assert "the capture-time budget alone excludes" in text


def test_gpu_library_refuses_clearly_without_cuda():
    from graphcourse.errors import NoCudaError
    from graphcourse.gpulib.graphs import as_device_position
    from graphcourse.gpulib.serving import PiecewiseDecoder, ServingDecoder, capture_list

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    m = _model()
    with pytest.raises(NoCudaError, match="capturing a list"):
        capture_list(m, m.new_cache(2), as_device_position(0, "cpu"), [1, 2])
    with pytest.raises(NoCudaError):
        ServingDecoder(m, [1, 2])
    with pytest.raises(NoCudaError):
        PiecewiseDecoder(m, m.new_cache(2), as_device_position(0, "cpu"), 2)


def test_the_explorer_wires_two_budget_sliders_to_render_tradeoff():
    explorer = S.tradeoff_explorer(S.chat_batch_distribution(64), _recorded(), "fake", 64, 0.2)
    assert set(explorer.controls) == {"memory_budget_mib", "capture_budget_s", "pool"}
    assert "'every 16'" in explorer.text
    explorer.controls["capture_budget_s"].value = 100.0  # re-renders: now memory binds (fake: 8 + n MiB)
    assert "'SGLang default'" in explorer.text and explorer.renders == 2
    explorer.controls["memory_budget_mib"].value = 4096.0
    assert "'every size'" in explorer.text
    assert [o["output_type"] for o in explorer.output.outputs] == ["stream", "display_data"]
    explorer.controls["memory_budget_mib"].value = 64.0
    explorer.controls["pool"].value = "private"  # fake: 2 MiB per size in a pool per graph -> <= 32 sizes fit
    assert "(a pool per graph)" in explorer.text and "'every 16'" in explorer.text


def _budget_lines(fig, gid):
    return [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid() == gid]


def test_the_tradeoff_figure_draws_each_budget_as_a_labelled_line():
    import matplotlib.pyplot as plt

    _, fig = S.render_tradeoff(1218, S.chat_batch_distribution(256), _recorded(), "fake", capture_budget_s=0.3)
    (mem,) = _budget_lines(fig, S.MEMORY_BUDGET_GID)
    (cap,) = _budget_lines(fig, S.CAPTURE_BUDGET_GID)
    assert list(mem.get_ydata()) == [1218, 1218] and "1218 MiB" in mem.get_label()
    assert "one shared pool" in mem.get_label()
    assert list(cap.get_ydata()) == [0.3, 0.3] and "0.30 s" in cap.get_label()
    legend = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert mem.get_label() in legend and cap.get_label() in legend  # named on the plot, not only in the text
    plt.close(fig)
    _, fig = S.render_tradeoff(64, S.chat_batch_distribution(256), _recorded(), "fake", pool="private")
    assert "a pool per graph" in _budget_lines(fig, S.MEMORY_BUDGET_GID)[0].get_label()
    assert _budget_lines(fig, S.CAPTURE_BUDGET_GID) == []  # no capture budget (inf): no line
    plt.close(fig)


def test_the_explorer_sliders_show_their_whole_description_and_a_plain_number():
    explorer = S.tradeoff_explorer(S.chat_batch_distribution(64), _recorded(), "fake", 1218, 0.3)
    for control in explorer.controls.values():
        assert control.style.description_width == "initial", control.description  # not cut to "memory ..."
    memory = explorer.controls["memory_budget_mib"]
    assert memory.description == "memory budget (MiB)"
    assert memory.readout_format == S.MEMORY_READOUT_FORMAT == ",.0f"
    assert format(memory.value, memory.readout_format) == "1,218"
    assert "e+" not in format(2.0**12, memory.readout_format)  # the default ".3g" printed 4.1e+03
    assert explorer.controls["capture_budget_s"].readout_format == ".2f"


def test_choose_sizes_reads_the_chosen_pool_column_and_says_which_budget_binds():
    rows = S.tradeoff_rows(S.chat_batch_distribution(256), _recorded())
    assert S.choose_sizes(rows, memory_budget_bytes=40 * 2**20, pool="private").name == "every 16"  # 38 MiB
    with pytest.raises(ValueError, match="pool is one of"):
        S.choose_sizes(rows, pool="mine")
    with pytest.raises(ValueError, match=r"a pool per graph.*cheapest is 'powers of two' \(9 sizes, 18.0 MiB\)"):
        S.choose_sizes(rows, memory_budget_bytes=2**20, pool="private")
    why = S.binding_budget(rows, 50 * 2**20, 0.2)
    assert why.startswith("the memory budget alone excludes 2 of 7 lists (every 4, every size)")
    assert why.endswith("the capture-time budget alone excludes 4 (vLLM default, SGLang default, every 4, every size)")


def test_segment_bytes_follows_get_allocation_size():
    assert S.segment_bytes(0) == S.segment_bytes(S.K_SMALL_SIZE) == 2 * 2**20          # small pool: 2 MiB
    assert S.segment_bytes(S.K_SMALL_SIZE + 1) == S.segment_bytes(10 * 2**20 - 1) == 20 * 2**20
    assert S.segment_bytes(10 * 2**20) == 10 * 2**20 and S.segment_bytes(10 * 2**20 + 1) == 12 * 2**20
    with pytest.raises(ValueError):
        S.segment_bytes(-1)


def _per_size_steps():
    mib = 2**20
    return [{"size": b, "capture_ms": 5.0, "private_pool_bytes": (2 if b < 4 else 4 if b < 9 else 22) * mib}
            for b in range(1, 17)]


def test_memory_facts_are_computed_from_the_section():
    assert S.memory_facts(None)[0].startswith("capture memory: not recorded yet")
    assert S.largest_size_lines(None) == ["by largest size: not recorded yet"]
    assert S.pool_steps(_per_size_steps()) == [(1, 3, 2 * 2**20), (4, 8, 4 * 2**20), (9, 16, 22 * 2**20)]
    model = {"d_model": 256, "n_heads": 4, "max_len": 128}
    assert S.gather_bytes(model, 1) == 128 * 1024 and S.first_large_segment_batch(model, 16) == 9
    assert S.first_large_segment_batch(model, 8) is None
    sec = {"lists": [dict(r, sizes=[1, 2, 4, 8, 16], n_sizes=5) for r in _recorded()["lists"][:2]],
           "per_size": _per_size_steps(), "model": model}
    sec["lists"][1]["n_sizes"] = 9
    facts = S.memory_facts(sec)
    assert "every list's largest size is 16" in facts[0]
    assert facts[1].startswith("one graph of size 16 alone, in its own pool: 22 MiB")
    assert "predicted jump at 9, recorded first pool of 20 MiB or more at 9" in facts[-1]
    assert S.largest_size_lines(sec, (8, 16, 99)) == ["largest size    8: one graph's pool    4 MiB",
                                                        "largest size   16: one graph's pool   22 MiB"]


def test_the_recorded_step_of_one_graphs_pool_is_where_the_allocator_rules_put_it():
    """On the recorded H200 section (when there is one): the shared pool is the same for every list and equals one
    graph of the largest size; the per-size pool first reaches a 20 MiB segment where the gather first exceeds 1 MiB."""
    try:
        sec = serving_section()
    except ReferenceDataError:
        pytest.skip("no recorded serving section")
    shared = {r["shared"]["pool_reserved_bytes"] for r in sec["lists"]}
    largest = {max(r["sizes"]) for r in sec["lists"]}
    per = {r["size"]: r["private_pool_bytes"] for r in sec["per_size"]}
    assert len(largest) == 1 and shared == {per[largest.pop()]}
    jump = min(b for b, v in per.items() if v >= S.K_LARGE_BUFFER)
    assert jump == S.first_large_segment_batch(sec["model"], max(per))


def test_sglang_capture_failure_advice_puts_the_memory_fraction_first():
    assert S.SGLANG_CAPTURE_FAILED_ADVICE[0].startswith("1. set --mem-fraction-static")
    assert S.SGLANG_CAPTURE_FAILED_ADVICE[1].startswith("2. set --cuda-graph-max-bs")


def test_eager_ops_per_step_counts_the_attention_operators_outside_the_graphs():
    from graphcourse.gpulib.graphs import as_device_position
    from graphcourse.gpulib.serving import PiecewiseDecoder, eager_ops_per_step

    m = _model()
    ops = eager_ops_per_step(PiecewiseDecoder(m, m.new_cache(2), as_device_position(1, "cpu"), 2, capture=False))
    layer = ops["per_layer"]
    assert layer["index_put_"] == 2 and layer["index_select"] == 2 and layer["copy_"] == 1
    assert sum(v for k, v in layer.items() if "scaled_dot_product" in k) == 1
    assert not set(layer) & S_VIEW_OPS()
    assert ops["per_step"] == {"zeros": 1, "gt": 1, "masked_fill_": 1, "clone": 1}
    assert ops["ops_per_step"] == ops["n_layers"] * 6 + 4


def S_VIEW_OPS():
    from graphcourse.gpulib.serving import VIEW_OPS

    return set(VIEW_OPS)


def test_toy_twin_imports_only_the_standard_library():
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, toygraph.serving\n"
            "std = set(sys.stdlib_module_names)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] not in std and m.split('.')[0] != 'toygraph'"
            " and not m.startswith('_')))")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "[]"


def test_capture_cost_model_falls_back_to_assumed_prices():
    toy, how = S.capture_cost_model(None)
    assert how.startswith("assumed") and toy == ToyCaptureCost()
    toy, how = S.capture_cost_model({"per_size": []})
    assert how.startswith("assumed")
    rows = [{"size": b, "capture_ms": 5 + b, "private_pool_bytes": 10 * b} for b in (1, 2)]
    how = S.capture_cost_model({"per_size": rows})[1]
    assert how.startswith("capture ms: a line fitted") and "step function" in how


def test_bench_lists_stops_starting_repeats_after_its_budget():
    from graphcourse.gpulib.bench_serving import bench_lists

    out = bench_lists({"a": (1, 2), "b": (1, 2, 4)}, repeats=3, device="cpu", capture_list=_fake_capture_list,
                      budget_s=0.0)
    assert out["repeats_done"] == 1 and out["per_size_from"] == "b"
    assert all(r["shared"]["capture_s_min"] == r["shared"]["capture_s_max"] for r in out["lists"])
    out = bench_lists({"a": (1, 2)}, repeats=2, device="cpu", capture_list=_fake_capture_list)
    assert out["repeats_done"] == 2


def test_bench_helpers_borrowed_from_the_course_benchmark_resolve():
    from graphcourse.gpulib.bench_cli import driver_version
    from graphcourse.gpulib.bench_serving import flat

    assert flat("t", [3.0, 1.0, 2.0]) == {"t": 2.0, "t_min": 1.0, "t_max": 3.0}
    assert driver_version() is None or isinstance(driver_version(), str)
