"""Lesson 13's "fewer kernels" lever: the tiny GPT's MLP block as two Triton kernels instead of five.

PyTorch runs ``x + fc2(gelu(fc1(ln2(x))))`` of one decode step as five kernels (layer norm,
a GEMM, gelu, a GEMM with its bias, the residual add); a CUDA graph replays all five, each with
its own node cost and its own start-up and tail. :func:`fused_mlp_residual` does the same math
in two kernels:

1. ``ln_fc1_gelu``: each program normalises its row (the whole row: ``d_model`` values), takes
   ``BLOCK_H`` rows of ``fc1``'s weight, and writes that slice of ``gelu(fc1(ln2(x)))``;
2. ``fc2_residual``: each program takes ``BLOCK_D`` outputs of ``fc2`` over the whole hidden
   row, adds the bias and the residual ``x``.

Two kernels, not one, because every output of ``fc2`` needs every hidden value: one kernel
would need a grid-wide barrier or atomics. The sums run in another order than cuBLAS's, so the
logits differ in the last bits; the benchmark checks that the greedy tokens stay those of eager.

Programmatic dependent launch (``pdl=True``, Hopper and later): both kernels are launched with
it, so each may be scheduled before the kernel ahead of it has finished; ``gdc_wait`` at the top
of the first holds its reads of ``x`` until the previous kernel's writes are visible, and
``gdc_launch_dependents`` right after it lets the second start early, where it loads its first
block of weights before its own ``gdc_wait`` (which waits for the whole first kernel, writes
included: Triton's docstring). Triton exposes both (``triton.language.extra.cuda``) and the ``launch_pdl`` launch
option; :func:`pdl_support` says whether the installed Triton has them.

Without CUDA or Triton, :func:`fused_mlp_reference` gives the same math in PyTorch (what the
CPU tests check the kernels' contract against).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["BLOCK_H", "BLOCK_D", "fused_mlp_reference", "fused_mlp_residual", "pdl_support"]

BLOCK_H = 32
BLOCK_D = 16
BLOCK_K = 256
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def pdl_support() -> dict[str, Any]:
    """What the installed Triton offers for programmatic dependent launch (names found, version)."""
    try:
        import triton
    except ImportError as exc:
        return {"triton": None, "gdc": False, "why": f"no triton: {exc}"}
    try:
        from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait  # noqa: F401
        gdc = True
    except ImportError:
        gdc = False
    return {"triton": triton.__version__, "gdc": gdc}


def fused_mlp_reference(blk: Any, x: Any) -> Any:
    """``x + blk.mlp(x)`` written as the two kernels compute it (layer norm by hand, tanh-gelu), in PyTorch."""
    import torch

    ln = blk.ln2
    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(-1, keepdim=True)
    xn = xc * torch.rsqrt(var + ln.eps) * ln.weight + ln.bias
    a = xn @ blk.fc1.weight.t() + blk.fc1.bias
    h = 0.5 * a * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (a + 0.044715 * a * a * a)))
    return x + h @ blk.fc2.weight.t() + blk.fc2.bias


_kernels: dict[str, Any] = {}


def _build() -> dict[str, Any]:
    if _kernels:
        return _kernels
    import triton
    import triton.language as tl

    gdc = pdl_support()["gdc"]
    if gdc:
        from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
    else:  # never traced: PDL stays False when the names are missing
        gdc_wait = gdc_launch_dependents = None

    @triton.jit
    def ln_fc1_gelu(x_ptr, lnw_ptr, lnb_ptr, w1_ptr, b1_ptr, h_ptr, eps,
                    D: tl.constexpr, H: tl.constexpr, BLOCK_H: tl.constexpr, PDL: tl.constexpr):
        row = tl.program_id(0)
        hb = tl.program_id(1)
        if PDL:
            gdc_wait()  # x comes from the kernel before: wait for its writes
            gdc_launch_dependents()  # let fc2_residual start now: its own gdc_wait holds its reads of h
        d = tl.arange(0, D)
        x = tl.load(x_ptr + row * D + d)
        mean = tl.sum(x, 0) / D
        xc = x - mean
        var = tl.sum(xc * xc, 0) / D
        xn = xc * (1.0 / tl.sqrt(var + eps)) * tl.load(lnw_ptr + d) + tl.load(lnb_ptr + d)
        hs = hb * BLOCK_H + tl.arange(0, BLOCK_H)
        w = tl.load(w1_ptr + hs[:, None] * D + d[None, :])
        a = tl.sum(w * xn[None, :], 1) + tl.load(b1_ptr + hs)
        z = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        g = 0.5 * a * (1.0 + (2.0 * tl.sigmoid(2.0 * z) - 1.0))  # tanh(z) = 2 sigmoid(2z) - 1
        tl.store(h_ptr + row * H + hs, g)

    @triton.jit
    def fc2_residual(h_ptr, w2_ptr, b2_ptr, x_ptr, out_ptr,
                     D: tl.constexpr, H: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_K: tl.constexpr,
                     PDL: tl.constexpr):
        row = tl.program_id(0)
        db = tl.program_id(1)
        ds = db * BLOCK_D + tl.arange(0, BLOCK_D)
        w_first = tl.load(w2_ptr + ds[:, None] * H + tl.arange(0, BLOCK_K)[None, :])  # weights need no wait
        if PDL:
            gdc_wait()  # the hidden row is the first kernel's output
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for k0 in tl.static_range(0, H, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            h = tl.load(h_ptr + row * H + ks)
            if k0 == 0:
                w = w_first
            else:
                w = tl.load(w2_ptr + ds[:, None] * H + ks[None, :])
            acc += tl.sum(w * h[None, :], 1)
        out = acc + tl.load(b2_ptr + ds) + tl.load(x_ptr + row * D + ds)
        tl.store(out_ptr + row * D + ds, out)

    _kernels.update(ln_fc1_gelu=ln_fc1_gelu, fc2_residual=fc2_residual)
    return _kernels


def fused_mlp_residual(blk: Any, x: Any, pdl: bool = False) -> Any:
    """``x + blk.mlp(x)`` for x [batch, d_model] float32 on CUDA, in two Triton kernels (see the module)."""
    import torch

    if x.device.type != "cuda" or x.dtype != torch.float32 or x.dim() != 2:
        raise ValueError(f"fused_mlp_residual takes a 2-D float32 CUDA tensor, got {x.dtype} {tuple(x.shape)} "
                         f"on {x.device}: on a CPU use fused_mlp_reference.")
    b, d = x.shape
    hidden = blk.fc1.weight.shape[0]
    if d % BLOCK_D or hidden % BLOCK_H or hidden % BLOCK_K or d & (d - 1):
        raise ValueError(f"d_model {d} must be a power of two and a multiple of {BLOCK_D}, the hidden width "
                         f"{hidden} a multiple of {BLOCK_K}: change BLOCK_D/BLOCK_H/BLOCK_K.")
    if pdl and not pdl_support()["gdc"]:
        raise ValueError(f"this Triton ({pdl_support()['triton']}) has no gdc_wait: call with pdl=False.")
    k = _build()
    x = x.contiguous()
    h = torch.empty(b, hidden, device=x.device, dtype=x.dtype)
    out = torch.empty_like(x)
    extra = {"launch_pdl": True} if pdl else {}
    k["ln_fc1_gelu"][(b, hidden // BLOCK_H)](x, blk.ln2.weight, blk.ln2.bias, blk.fc1.weight, blk.fc1.bias, h,
                                              blk.ln2.eps, D=d, H=hidden, BLOCK_H=BLOCK_H, PDL=pdl, **extra)
    k["fc2_residual"][(b, d // BLOCK_D)](h, blk.fc2.weight, blk.fc2.bias, x, out, D=d, H=hidden,
                                         BLOCK_D=BLOCK_D, BLOCK_K=BLOCK_K, PDL=pdl, **extra)
    return out
