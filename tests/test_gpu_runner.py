"""Padding, slicing and the bucketed runner's logic, driven on CPU tensors through EagerStep."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings, strategies as st

from graphcourse.errors import BatchShapeError
from graphcourse.gpulib.graphs import BucketedRunner, EagerStep, fill_padded_, pad_rows, slice_rows
from toygraph.buckets import EagerFallbackWarning, padding_report


def row_fn(x: torch.Tensor) -> torch.Tensor:
    """A row-independent step, like a decode step: each row's output depends on that row alone."""
    return torch.tanh(x @ torch.arange(12.0).view(3, 4)) + 1


def make_runner(buckets=(1, 2, 4, 8), **kw) -> BucketedRunner:
    return BucketedRunner(row_fn, torch.zeros(1, 3), buckets, progress=False, step_factory=EagerStep.build, **kw)


def test_pad_rows_appends_pad_value_rows() -> None:
    x = torch.tensor([[1, 2], [3, 4], [5, 6]])
    padded = pad_rows(x, 4, pad_value=-1)
    assert padded.tolist() == [[1, 2], [3, 4], [5, 6], [-1, -1]]
    assert x.shape == (3, 2), "padding must not change the request"


def test_fill_padded_writes_in_place_and_clears_stale_rows() -> None:
    static = torch.full((4, 2), 9.0)
    ptr = static.data_ptr()
    fill_padded_(static, torch.ones(1, 2), pad_value=0.0)
    assert static.data_ptr() == ptr, "a captured graph reads this address: it must be filled in place"
    assert static.tolist() == [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize(
    "batch, match",
    [(torch.ones(5, 2), "does not fit a bucket of 4"), (torch.ones(2, 3), "row"), (torch.ones(2, 2, dtype=torch.int64), "dtype")],
)
def test_fill_padded_rejects_batches_that_do_not_fit(batch, match) -> None:
    with pytest.raises(BatchShapeError, match=match):
        fill_padded_(torch.zeros(4, 2), batch)


def test_slice_rows_copies_so_the_next_replay_cannot_overwrite() -> None:
    out = torch.arange(8.0).view(4, 2)
    first = slice_rows(out, 2)
    out.zero_()
    assert first.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    a, b = slice_rows((torch.ones(4), torch.zeros(4, 3)), 3)
    assert a.shape == (3,) and b.shape == (3, 3)
    assert slice_rows(out, 1, copy=False).data_ptr() == out.data_ptr()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=12), st.integers(0, 1000))
def test_runner_output_equals_eager_for_any_stream(sizes, seed) -> None:
    runner = make_runner()
    gen = torch.Generator().manual_seed(seed)
    for n in sizes:
        x = torch.randn(n, 3, generator=gen)
        out = runner(x)
        assert out.shape == (n, 4)
        torch.testing.assert_close(out, row_fn(x))
    report = runner.report()
    assert report.padding == padding_report(sizes, (1, 2, 4, 8))
    assert sum(b.replays for b in report.buckets) == len(sizes)


def test_runner_replays_the_smallest_bucket_that_fits() -> None:
    runner = make_runner()
    for n in (1, 3, 3, 5, 8):
        runner(torch.ones(n, 3))
    replays = {b.bucket: b.replays for b in runner.report().buckets}
    assert replays == {1: 1, 2: 0, 4: 2, 8: 2}
    assert runner.report().waste_fraction == pytest.approx((1 + 1 + 3) / (1 + 4 + 4 + 8 + 8))


def test_runner_runs_eagerly_with_a_warning_above_the_largest_bucket() -> None:
    runner = make_runner(buckets=[1, 2, 4])
    x = torch.randn(6, 3)
    with pytest.warns(EagerFallbackWarning, match="above the largest captured bucket \\(4\\)"):
        out = runner(x)
    torch.testing.assert_close(out, row_fn(x))
    assert runner.report().padding.eager_batches == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runner(torch.randn(4, 3))  # fits: no warning


def test_runner_outputs_survive_later_calls() -> None:
    runner = make_runner()
    first = runner(torch.ones(2, 3))
    kept = first.clone()
    runner(torch.full((2, 3), 5.0))
    assert torch.equal(first, kept)


def test_eager_step_rejects_another_shape_like_a_graph_would() -> None:
    step = EagerStep.build(row_fn, torch.zeros(4, 3))
    with pytest.raises(BatchShapeError, match="pad each batch"):
        step.replay(torch.zeros(3, 3))


def test_runner_rejects_an_unusable_bucket_list() -> None:
    with pytest.raises(ValueError, match="empty"):
        make_runner(buckets=[])


# --------------------------------------------------------------------------- padded rows and the KV cache (issue 8, point 4)


def _decode_setup():
    from graphcourse.gpulib.graphs import GPTConfig, TinyGPT, as_device_position

    model = TinyGPT(GPTConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, max_len=8))
    return model, model.new_cache(4), as_device_position(2, "cpu")


def test_padded_rows_of_the_decode_runner_never_write_a_live_sequences_cache_slot() -> None:
    from graphcourse.gpulib.graphs import decode_runner

    model, cache, pos = _decode_setup()
    runner = decode_runner(model, cache, pos, (1, 2, 4), progress=False, step_factory=EagerStep.build)
    tokens = torch.tensor([5, 6, 7, 8])
    runner(tokens, torch.arange(4))  # four live sequences, slots 0..3, write position 2
    live_row_3 = cache.k[:, 3].clone(), cache.v[:, 3].clone()
    assert live_row_3[0][:, :, 2].abs().sum() > 0, "the fourth sequence wrote its keys at position 2"
    pos.fill_(3)
    runner(tokens[:3], torch.arange(3))  # only three of them step: padded to bucket 4
    assert torch.equal(cache.k[:, 3], live_row_3[0]) and torch.equal(cache.v[:, 3], live_row_3[1]), (
        "the padded row wrote into slot 3, which belongs to a live sequence")
    assert cache.k[:, :3, :, 3].abs().sum() > 0, "the three real rows wrote position 3"
    assert cache.k[:, cache.pad_slot, :, 3].abs().sum() > 0, "the padded row wrote the scratch slot instead"


def test_slotted_decode_equals_row_per_slot_decode_for_live_rows() -> None:
    model, cache, pos = _decode_setup()
    tokens = torch.tensor([5, 6, 7])
    plain = model.decode_logits(tokens, pos, cache.batch_view(3))
    other = model.new_cache(4)
    slotted = model.decode_logits(tokens, pos, other, slots=torch.tensor([0, 1, 2]))
    torch.testing.assert_close(slotted, plain)
    torch.testing.assert_close(other.k[:, :3], cache.k[:, :3])


def test_why_the_scratch_slot_exists_a_bucket_view_lets_padding_clobber_a_live_row() -> None:
    """The recipe the course used before: bucket b's graph owned cache rows 0..b-1, so padding wrote a live row."""
    model, cache, pos = _decode_setup()
    tokens = torch.tensor([5, 6, 7, 8])
    model.decode_step(tokens, pos, cache.batch_view(4))
    live_row_3 = cache.k[:, 3].clone()
    model.decode_step(torch.tensor([5, 6, 7, 0]), pos, cache.batch_view(4))  # batch of 3 padded with token 0
    assert not torch.equal(cache.k[:, 3], live_row_3)


def test_a_cache_view_has_no_scratch_slot_and_says_so() -> None:
    _, cache, _ = _decode_setup()
    assert cache.pad_slot == 4 and cache.batch == 4
    with pytest.raises(BatchShapeError, match="scratch slot"):
        cache.batch_view(2).pad_slot


def test_runner_with_several_inputs_checks_their_rows() -> None:
    runner = BucketedRunner(lambda x, y: x + y, (torch.zeros(1), torch.zeros(1)), (1, 2, 4), pad_value=(0, -1),
                            progress=False, step_factory=EagerStep.build)
    assert runner(torch.ones(3), torch.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert runner.steps[4].static_inputs[1].tolist() == [1.0, 1.0, 1.0, -1.0]
    with pytest.raises(BatchShapeError, match="one row per sequence"):
        runner(torch.ones(3), torch.ones(2))
    with pytest.raises(BatchShapeError, match="batched input"):
        runner(torch.ones(3))


def test_a_runner_over_a_kv_cache_refuses_a_step_without_slots() -> None:
    model, cache, pos = _decode_setup()

    def unsafe(tokens):
        return model.decode_step(tokens, pos, cache.batch_view(tokens.shape[0]))

    with pytest.raises(BatchShapeError, match="cache slot as the step's last input"):
        BucketedRunner(unsafe, torch.zeros(1, dtype=torch.long), (1, 2, 4), cache=cache, progress=False,
                       step_factory=EagerStep.build)
    runner = BucketedRunner(lambda t, s: model.decode_step(t, pos, cache, slots=s),
                            (torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long)), (1, 2, 4),
                            pad_value=(0, 0), cache=cache, progress=False, step_factory=EagerStep.build)
    assert runner.pad_values[-1] == cache.pad_slot, "the cache's scratch slot replaces any other slot pad"
