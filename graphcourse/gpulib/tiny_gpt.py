"""The tiny GPT with a static KV cache: the decode step whose launch cost a graph removes, and greedy decoding.

Part of :mod:`graphcourse.gpulib.graphs`; runs on a CPU too."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import BatchShapeError

# --------------------------------------------------------------------------- tiny GPT with a static KV cache


@dataclass(frozen=True, kw_only=True)
class GPTConfig:
    """Sizes of the tiny GPT-style decoder, each given by name: ``GPTConfig(n_layers=2, max_len=32)``."""

    vocab_size: int = 1024
    """Token ids the model reads and scores: 0 .. vocab_size - 1."""
    d_model: int = 256
    """Width of every token's vector, split evenly across the heads (TinyGPT checks that it divides)."""
    n_layers: int = 4
    """Decoder blocks, each attention then an MLP."""
    n_heads: int = 4
    """Attention heads per block."""
    max_len: int = 128
    """Positions the static KV cache holds: a sequence cannot decode past it."""

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads


@dataclass
class StaticKVCache:
    """Keys and values preallocated once, each [layers, slots, heads, max_len, head_dim], written in place at a device position.

    Slots 0 .. ``batch - 1`` belong to sequences; one more slot, ``pad_slot``, belongs to no
    sequence: padded rows of a bucketed batch write their keys and values there (vLLM's
    ``PAD_SLOT_ID`` plays this part), never into a live sequence's slot.
    """

    k: Tensor
    v: Tensor
    live_slots: int | None = None

    @classmethod
    def allocate(
        cls, config: GPTConfig, max_batch: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
    ) -> "StaticKVCache":
        """Zeroed cache for up to `max_batch` sequences of up to config.max_len tokens, plus one scratch slot."""
        shape = (config.n_layers, max_batch + 1, config.n_heads, config.max_len, config.head_dim)
        return cls(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype),
                   max_batch)

    @property
    def batch(self) -> int:
        """Number of sequences this cache (or view) holds (the scratch slot not counted)."""
        return self.k.shape[1] if self.live_slots is None else self.live_slots

    @property
    def pad_slot(self) -> int:
        """The scratch slot padded rows write into: owned by no sequence."""
        if self.live_slots is None or self.k.shape[1] <= self.live_slots:
            raise BatchShapeError("this cache view has no scratch slot: take the pad slot from the full cache.")
        return self.live_slots

    @property
    def nbytes(self) -> int:
        """Bytes of the keys and values together (the scratch slot included)."""
        return self.k.numel() * self.k.element_size() * 2

    def batch_view(self, batch: int) -> "StaticKVCache":
        """The first `batch` sequences, a view sharing memory, with no scratch slot.

        Fine for a batch that fills it. Not for a padded bucket: its padded rows would write the
        rows of live sequences. Give each row its slot instead (``decode_step(..., slots=...)``;
        :func:`decode_runner` pads slots with ``pad_slot``).
        """
        if batch > self.batch:
            raise BatchShapeError(
                f"the cache holds {self.batch} sequences, asked for {batch}: allocate it for the largest bucket."
            )
        return StaticKVCache(self.k[:, :batch], self.v[:, :batch], batch)

    def reset_(self) -> None:
        """Zero the keys and values in place (addresses unchanged, so captured graphs stay valid)."""
        self.k.zero_()
        self.v.zero_()


class _Block(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.fc1 = nn.Linear(c.d_model, 4 * c.d_model)
        self.fc2 = nn.Linear(4 * c.d_model, c.d_model)

    def mlp(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class TinyGPT(nn.Module):
    """A small GPT-style decoder: learned positions, pre-norm blocks, greedy next token chosen on the device."""

    def __init__(self, config: GPTConfig | None = None, seed: int = 0) -> None:
        super().__init__()
        c = config or GPTConfig()
        if c.d_model % c.n_heads:
            raise ValueError(f"d_model {c.d_model} is not divisible by n_heads {c.n_heads}: pick heads that divide it.")
        self.config = c
        torch.manual_seed(seed)
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.blocks = nn.ModuleList(_Block(c) for _ in range(c.n_layers))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.register_buffer("positions", torch.arange(c.max_len), persistent=False)
        self.register_buffer("head_ids", torch.arange(c.n_heads), persistent=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.5 / math.sqrt(p.shape[-1]))
        self.requires_grad_(False)
        self.eval()

    def forward(self, tokens: Tensor) -> Tensor:
        """Logits [batch, time, vocab] by recomputing every position with a causal mask (the naive reference)."""
        c = self.config
        b, t = tokens.shape
        x = self.tok_emb(tokens) + self.pos_emb(self.positions[:t])
        causal = torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril()
        for blk in self.blocks:
            q, k, v = blk.qkv(blk.ln1(x)).view(b, t, 3, c.n_heads, c.head_dim).permute(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(c.head_dim)
            att = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v  # [b, heads, t, head_dim]
            x = x + blk.proj(att.transpose(1, 2).reshape(b, t, c.d_model))
            x = x + blk.mlp(x)
        return self.head(self.ln_f(x))

    def decode_logits(self, tokens: Tensor, pos: Tensor, cache: StaticKVCache, slots: Tensor | None = None,
                      mlp_residual: Callable[[nn.Module, Tensor], Tensor] | None = None,
                      attend: Callable[[int, Tensor, Tensor, StaticKVCache], Tensor] | None = None) -> Tensor:
        """Logits [batch, vocab] for one new token per sequence at device position `pos`, writing K and V into `cache`.

        Lesson 13 swaps fused kernels in, and checks that the tokens stay those of the plain step:
        `mlp_residual(block, x)` replaces ``x + block.mlp(x)``; `attend(layer, qkv, index, cache)`
        (without `slots` only) replaces writing K and V into the cache and attending, from the
        ``qkv`` projection [batch, 3 * d_model] to the heads' outputs [batch, d_model].

        Without `slots`, row i of the batch reads and writes cache slot i. With `slots` (a device
        tensor of one slot index per row), row i uses slot ``slots[i]``: padded rows pass the
        cache's ``pad_slot`` so their writes land where no sequence reads.
        """
        c = self.config
        b = tokens.shape[0]
        if slots is None and cache.batch != b:
            raise BatchShapeError(
                f"{b} tokens but a cache of {cache.batch} sequences: pass cache.batch_view({b}) for this batch."
            )
        if slots is not None and tuple(slots.shape) != (b,):
            raise BatchShapeError(f"{b} tokens but slots of shape {tuple(slots.shape)}: give one cache slot per row.")
        index = pos.reshape(1)  # a device tensor: no .item(), so the step can be captured and replayed
        x = self.tok_emb(tokens) + self.pos_emb(index)
        # Attend to positions 0..pos of the preallocated cache; later slots are masked out.
        if attend is None or slots is not None:  # the hand-made attention masks by itself
            mask = torch.zeros(c.max_len, dtype=x.dtype, device=x.device).masked_fill_(self.positions > index,
                                                                                      float("-inf"))
            mask = mask.view(1, 1, 1, c.max_len)
        for layer, blk in enumerate(self.blocks):
            qkv = blk.qkv(blk.ln1(x))
            if attend is not None and slots is None:
                x = x + blk.proj(attend(layer, qkv, index, cache))
                x = x + blk.mlp(x) if mlp_residual is None else mlp_residual(blk, x)
                continue
            q, k, v = qkv.view(b, 3, c.n_heads, 1, c.head_dim).unbind(1)
            if slots is None:
                k_cache, v_cache = cache.k[layer, :b], cache.v[layer, :b]  # [b, heads, max_len, head_dim]
                k_cache.index_copy_(2, index, k)
                v_cache.index_copy_(2, index, v)
            else:
                where = (slots[:, None], self.head_ids[None, :], index.expand(b, c.n_heads))
                cache.k[layer].index_put_(where, k[:, :, 0])
                cache.v[layer].index_put_(where, v[:, :, 0])
                k_cache, v_cache = cache.k[layer].index_select(0, slots), cache.v[layer].index_select(0, slots)
            att = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)  # [b, heads, 1, head_dim]
            x = x + blk.proj(att.reshape(b, c.d_model))
            x = x + blk.mlp(x) if mlp_residual is None else mlp_residual(blk, x)
        return self.head(self.ln_f(x))

    def decode_step(self, tokens: Tensor, pos: Tensor, cache: StaticKVCache, slots: Tensor | None = None,
                    mlp_residual: Callable[[nn.Module, Tensor], Tensor] | None = None,
                    attend: Callable[[int, Tensor, Tensor, StaticKVCache], Tensor] | None = None) -> Tensor:
        """Next token per sequence (greedy argmax on the device, no host sync): the step a graph captures."""
        return self.decode_logits(tokens, pos, cache, slots, mlp_residual, attend).argmax(-1)

    def new_cache(self, max_batch: int, device: torch.device | str | None = None) -> StaticKVCache:
        """A static KV cache for this model on its device (or `device`)."""
        dev = device if device is not None else self.head.weight.device
        return StaticKVCache.allocate(self.config, max_batch, dev, self.head.weight.dtype)



def as_device_position(pos: int, device: torch.device | str) -> Tensor:
    """A 0-dim int64 tensor holding `pos` on `device` (the decode step reads its position from here)."""
    return torch.tensor(pos, dtype=torch.long, device=device)


def greedy_tokens_eager(model: TinyGPT, prompt: Tensor, new_tokens: int) -> Tensor:
    """Greedy continuation of `prompt` [batch, time] by full recompute each token (slow reference)."""
    tokens = prompt
    for _ in range(new_tokens):
        nxt = model(tokens)[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, nxt], dim=1)
    return tokens[:, prompt.shape[1] :]


def greedy_tokens_cached(model: TinyGPT, prompt: Tensor, new_tokens: int, step: Callable[..., Tensor] | None = None) -> Tensor:
    """Greedy continuation with the static KV cache, one decode step per token (prompt fed token by token)."""
    b, t = prompt.shape
    cache = model.new_cache(b, prompt.device)
    pos = as_device_position(0, prompt.device)
    run = step or (lambda tok, p: model.decode_step(tok, p, cache))
    out = []
    nxt = prompt[:, 0]
    for i in range(t + new_tokens - 1):
        pos.fill_(i)
        tok = prompt[:, i] if i < t else nxt
        nxt = run(tok, pos)
        if i >= t - 1:
            out.append(nxt)
    return torch.stack(out, dim=1)
