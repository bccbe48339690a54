"""Lesson 13's second "fewer kernels" lever: one decode step's attention as one Triton kernel instead of three.

The plain step writes the new key and value into the KV cache (two ``index_copy_`` kernels),
then calls ``scaled_dot_product_attention`` over the whole preallocated cache, masked after the
position; for one query per sequence in float32, PyTorch picks a memory-efficient kernel
(``fmha_cutlassF_f32...``) that the recorded trace shows as the longest kernel of the step.
:func:`decode_attention` does the three in one kernel, one program per (sequence, head): it
reads the head's query, key and value from the ``qkv`` projection, stores the key and value at
the position in the cache, scores the query against positions ``0..pos`` (the new key taken
from registers, not read back), softmaxes and sums the values. Its sums run in another order
than PyTorch's, so the benchmark checks that the greedy tokens stay eager's.

:func:`decode_attention_reference` is the same contract in PyTorch (the CPU tests use it).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["decode_attention", "decode_attention_reference"]

_kernels: dict[str, Any] = {}


def decode_attention_reference(layer: int, qkv: Any, index: Any, cache: Any) -> Any:
    """Write K and V at `index` into `cache` (layer `layer`, row i in slot i) and attend: [batch, d_model]."""
    import torch

    b, three_d = qkv.shape
    heads, hdim = cache.k.shape[2], cache.k.shape[4]
    q, k, v = qkv.view(b, 3, heads, 1, hdim).unbind(1)
    k_cache, v_cache = cache.k[layer, :b], cache.v[layer, :b]
    k_cache.index_copy_(2, index, k)
    v_cache.index_copy_(2, index, v)
    scores = (q @ k_cache.transpose(-1, -2)) / math.sqrt(hdim)  # [b, heads, 1, max_len]
    later = torch.arange(k_cache.shape[2], device=qkv.device) > index
    att = scores.masked_fill(later, float("-inf")).softmax(-1) @ v_cache
    return att.reshape(b, three_d // 3)


def _build() -> dict[str, Any]:
    if _kernels:
        return _kernels
    import triton
    import triton.language as tl

    @triton.jit
    def attend(qkv_ptr, k_ptr, v_ptr, pos_ptr, out_ptr, s_slot, s_head, s_pos, scale,
               HEADS: tl.constexpr, HDIM: tl.constexpr, MAX_LEN: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        d = tl.arange(0, HDIM)
        t = tl.arange(0, MAX_LEN)
        width = HEADS * HDIM
        base = qkv_ptr + row * 3 * width + head * HDIM
        q = tl.load(base + d)
        k_new = tl.load(base + width + d)
        v_new = tl.load(base + 2 * width + d)
        pos = tl.load(pos_ptr)
        cache = row * s_slot + head * s_head
        tl.store(k_ptr + cache + pos * s_pos + d, k_new)
        tl.store(v_ptr + cache + pos * s_pos + d, v_new)
        offs = cache + t[:, None] * s_pos + d[None, :]
        here = (t == pos)[:, None]
        keys = tl.where(here, k_new[None, :], tl.load(k_ptr + offs))
        vals = tl.where(here, v_new[None, :], tl.load(v_ptr + offs))
        scores = tl.sum(keys * q[None, :], 1) * scale
        scores = tl.where(t <= pos, scores, float("-inf"))
        p = tl.exp(scores - tl.max(scores, 0))
        p = p / tl.sum(p, 0)
        out = tl.sum(vals * p[:, None], 0)
        tl.store(out_ptr + row * width + head * HDIM + d, out)

    _kernels["attend"] = attend
    return _kernels


def decode_attention(layer: int, qkv: Any, index: Any, cache: Any) -> Any:
    """:func:`decode_attention_reference` as one Triton kernel, for float32 CUDA tensors."""
    import torch

    if qkv.device.type != "cuda" or qkv.dtype != torch.float32 or qkv.dim() != 2:
        raise ValueError(f"decode_attention takes a 2-D float32 CUDA qkv, got {qkv.dtype} {tuple(qkv.shape)} on "
                         f"{qkv.device}: on a CPU use decode_attention_reference.")
    b = qkv.shape[0]
    _, slots, heads, max_len, hdim = cache.k.shape
    if b > slots or max_len & (max_len - 1) or hdim & (hdim - 1):
        raise ValueError(f"batch {b} needs at most {slots} cache slots, and max_len {max_len} and head_dim {hdim} "
                         "powers of two.")
    k, v = cache.k[layer], cache.v[layer]
    out = torch.empty(b, heads * hdim, device=qkv.device, dtype=qkv.dtype)
    _build()["attend"][(b, heads)](qkv.contiguous(), k, v, index, out, k.stride(0), k.stride(1), k.stride(2),
                                   1.0 / math.sqrt(hdim), HEADS=heads, HDIM=hdim, MAX_LEN=max_len)
    return out
