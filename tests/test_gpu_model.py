"""The tiny GPT's decode step with a static KV cache equals a naive full recompute, on the CPU."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from graphcourse.errors import BatchShapeError
from graphcourse.gpulib.graphs import (
    GPTConfig,
    StaticKVCache,
    TinyGPT,
    as_device_position,
    greedy_tokens_cached,
    greedy_tokens_eager,
)

SMALL = GPTConfig(vocab_size=97, d_model=32, n_layers=2, n_heads=4, max_len=16)


def decode_all_positions(model: TinyGPT, tokens: torch.Tensor) -> torch.Tensor:
    """Logits [batch, time, vocab] from feeding `tokens` one position at a time through the static cache."""
    cache = model.new_cache(tokens.shape[0])
    pos = as_device_position(0, tokens.device)
    out = []
    for t in range(tokens.shape[1]):
        pos.fill_(t)
        out.append(model.decode_logits(tokens[:, t], pos, cache))
    return torch.stack(out, dim=1)


@settings(max_examples=15, deadline=None)
@given(
    heads=st.sampled_from([1, 2, 4]),
    head_dim=st.sampled_from([4, 8]),
    layers=st.integers(1, 3),
    batch=st.integers(1, 4),
    steps=st.integers(1, 12),
    seed=st.integers(0, 2**16),
)
def test_decode_with_static_cache_equals_full_recompute(heads, head_dim, layers, batch, steps, seed) -> None:
    config = GPTConfig(vocab_size=61, d_model=heads * head_dim, n_layers=layers, n_heads=heads, max_len=12)
    model = TinyGPT(config, seed=seed)
    tokens = torch.randint(0, config.vocab_size, (batch, steps), generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(decode_all_positions(model, tokens), model(tokens), rtol=1e-4, atol=1e-4)


def test_default_model_matches_recompute_at_full_size() -> None:
    model = TinyGPT()
    assert (model.config.d_model, model.config.n_layers) == (256, 4)
    tokens = torch.randint(0, model.config.vocab_size, (2, 6), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(decode_all_positions(model, tokens), model(tokens), rtol=1e-4, atol=1e-4)


def test_greedy_generation_with_cache_equals_recompute() -> None:
    model = TinyGPT(SMALL, seed=3)
    prompt = torch.randint(0, SMALL.vocab_size, (3, 4), generator=torch.Generator().manual_seed(3))
    expected = greedy_tokens_eager(model, prompt, 8)
    assert expected.shape == (3, 8)
    assert torch.equal(greedy_tokens_cached(model, prompt, 8), expected)


def test_decode_step_never_syncs_with_the_host(monkeypatch) -> None:
    model = TinyGPT(SMALL)
    cache = model.new_cache(2)
    pos = as_device_position(5, "cpu")

    def forbidden(*_args, **_kwargs):
        raise AssertionError("the decode step read a value back to the host: a captured graph cannot do that")

    for name in ("item", "tolist", "__int__", "__index__", "nonzero"):
        monkeypatch.setattr(torch.Tensor, name, forbidden)
    nxt = model.decode_step(torch.tensor([1, 2]), pos, cache)
    assert nxt.shape == (2,) and nxt.dtype == torch.long


def test_decode_writes_keys_and_values_only_at_the_position() -> None:
    model = TinyGPT(SMALL)
    cache = model.new_cache(2)
    model.decode_step(torch.tensor([5, 6]), as_device_position(7, "cpu"), cache)
    written = cache.k.abs().sum(dim=(0, 1, 2, 4))  # per position
    assert written[7] > 0
    assert torch.count_nonzero(written) == 1
    assert cache.k.shape == (SMALL.n_layers, 2 + 1, SMALL.n_heads, SMALL.max_len, SMALL.head_dim)  # + scratch slot


def test_cache_batch_view_shares_memory_and_rejects_overflow() -> None:
    cache = StaticKVCache.allocate(SMALL, max_batch=8)
    view = cache.batch_view(3)
    assert view.batch == 3 and view.k.data_ptr() == cache.k.data_ptr()
    view.v.fill_(1.0)
    assert cache.v[:, :3].eq(1).all() and cache.v[:, 3:].eq(0).all()
    with pytest.raises(BatchShapeError, match="allocate it for the largest bucket"):
        cache.batch_view(9)
    assert cache.nbytes == 2 * cache.k.numel() * 4


def test_decode_with_a_cache_of_the_wrong_batch_says_how_to_fix_it() -> None:
    model = TinyGPT(SMALL)
    with pytest.raises(BatchShapeError, match=r"batch_view\(2\)"):
        model.decode_step(torch.tensor([1, 2]), as_device_position(0, "cpu"), model.new_cache(4))


def test_heads_must_divide_width() -> None:
    with pytest.raises(ValueError, match="not divisible"):
        TinyGPT(GPTConfig(d_model=30, n_heads=4))
