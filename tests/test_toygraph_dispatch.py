"""toygraph.dispatch: vLLM's graph modes, the downgrade an attention backend forces, and which graph one step runs."""

from __future__ import annotations

import itertools

import pytest

from toygraph import InvalidArgumentError
from toygraph.dispatch import (
    AttentionCGSupport,
    BatchDescriptor,
    CUDAGraphMode,
    Dispatched,
    Resolution,
    UnsupportedModeError,
    describe_batch,
    dispatch,
    resolve_mode,
)

M, S = CUDAGraphMode, AttentionCGSupport
SIZES = [1, 2, 4, 8, 16, 24, 32]


# --- the two enums, as vLLM defines them ------------------------------------------------------------------

def test_modes_pair_a_decode_mode_with_a_mixed_mode_as_vllm_does():
    assert M.FULL_DECODE_ONLY.value == (2, 0) and M.FULL_AND_PIECEWISE.value == (2, 1)
    assert (M.FULL_DECODE_ONLY.decode_mode(), M.FULL_DECODE_ONLY.mixed_mode()) == (M.FULL, M.NONE)
    assert (M.FULL_AND_PIECEWISE.decode_mode(), M.FULL_AND_PIECEWISE.mixed_mode()) == (M.FULL, M.PIECEWISE)
    for single in (M.NONE, M.PIECEWISE, M.FULL):
        assert single.decode_mode() == single.mixed_mode() == single and not single.separate_routine()
    assert [m.name for m in M if m.has_full_cudagraphs()] == ["FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
    assert M.FULL_AND_PIECEWISE.has_mode(M.PIECEWISE) and not M.FULL_DECODE_ONLY.has_mode(M.PIECEWISE)
    assert str(M.FULL_AND_PIECEWISE) == "FULL_AND_PIECEWISE"


def test_support_is_ordered_as_vllm_orders_it():
    assert [s.name for s in sorted(S, key=lambda s: -s.value)] == [
        "ALWAYS", "UNIFORM_BATCH", "UNIFORM_SINGLE_TOKEN_DECODE", "NEVER"]
    assert [s.value for s in S] == [3, 2, 1, 0]


# --- resolve_mode: each downgrade rule --------------------------------------------------------------------

def test_full_with_a_backend_short_of_always_becomes_full_and_piecewise():
    for sup in (S.UNIFORM_BATCH, S.UNIFORM_SINGLE_TOKEN_DECODE):
        mode, reason = resolve_mode(M.FULL, sup, backend="FlashInferBackend")
        assert mode is M.FULL_AND_PIECEWISE
        assert reason == (f"CUDAGraphMode.FULL is not supported with FlashInferBackend backend (support: "
                          f"AttentionCGSupport.{sup.name}); setting cudagraph_mode=FULL_AND_PIECEWISE")


def test_full_without_piecewise_attention_becomes_full_decode_only():
    mode, reason = resolve_mode("full", "uniform_batch", attention_piecewise=False)
    assert mode is M.FULL_DECODE_ONLY and reason.endswith("setting cudagraph_mode=FULL_DECODE_ONLY")


def test_full_with_a_backend_that_never_supports_graphs_refuses_to_start():
    with pytest.raises(UnsupportedModeError, match="please try cudagraph_mode=PIECEWISE") as err:
        resolve_mode(M.FULL, S.NEVER)
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize("requested", [M.FULL_DECODE_ONLY, M.FULL_AND_PIECEWISE])
def test_full_decode_with_never_falls_to_piecewise_not_none(requested):
    mode, reason = resolve_mode(requested, S.NEVER)
    assert mode is M.PIECEWISE
    assert reason.endswith("setting cudagraph_mode=PIECEWISE because attention is compiled piecewise")


def test_full_decode_only_with_never_and_no_piecewise_attention_falls_to_none():
    mode, reason = resolve_mode(M.FULL_DECODE_ONLY, S.NEVER, attention_piecewise=False)
    assert mode is M.NONE and reason.endswith("because attention is not compiled piecewise")


@pytest.mark.parametrize("requested", [M.FULL_DECODE_ONLY, M.FULL_AND_PIECEWISE])
def test_spec_decode_needs_uniform_batch_for_full_decode_graphs(requested):
    single = S.UNIFORM_SINGLE_TOKEN_DECODE
    assert resolve_mode(requested, single) == Resolution(requested, "")  # without spec decode: kept
    mode, reason = resolve_mode(requested, single, num_speculative_tokens=2)
    assert mode is M.PIECEWISE and "with spec-decode" in reason
    assert resolve_mode(requested, S.UNIFORM_BATCH, num_speculative_tokens=2) == Resolution(requested, "")
    assert resolve_mode(M.FULL_DECODE_ONLY, single, num_speculative_tokens=1,
                        attention_piecewise=False).mode is M.NONE


def test_rules_apply_in_order_each_on_the_previous_result():
    mode, reason = resolve_mode(M.FULL, S.UNIFORM_SINGLE_TOKEN_DECODE, num_speculative_tokens=3)
    assert mode is M.PIECEWISE  # FULL -> FULL_AND_PIECEWISE (rule 1) -> PIECEWISE (rule 3)
    assert "setting cudagraph_mode=FULL_AND_PIECEWISE; then CUDAGraphMode.FULL_AND_PIECEWISE" in reason


def test_nothing_changes_where_the_backend_supports_the_request():
    for requested, k in itertools.product(M, (0, 1, 4)):
        assert resolve_mode(requested, S.ALWAYS, num_speculative_tokens=k) == (requested, "")
    for sup in S:
        assert resolve_mode(M.PIECEWISE, sup) == (M.PIECEWISE, "")
        assert resolve_mode(M.NONE, sup, num_speculative_tokens=2) == (M.NONE, "")


def test_every_resolved_mode_is_one_the_backend_can_run():
    for requested, sup, k, piecewise in itertools.product(M, S, (0, 2), (True, False)):
        if requested.has_mode(M.PIECEWISE) and not piecewise:
            continue
        try:
            mode, reason = resolve_mode(requested, sup, num_speculative_tokens=k, attention_piecewise=piecewise)
        except UnsupportedModeError:
            assert requested is M.FULL and sup is S.NEVER
            continue
        assert (mode == requested) == (reason == "")
        if mode.mixed_mode() is M.FULL:
            assert sup is S.ALWAYS
        if mode.decode_mode() is M.FULL:
            assert sup is not S.NEVER and (k == 0 or sup.value >= S.UNIFORM_BATCH.value)


# --- batches: uniform decode, 1 + k tokens per request ---------------------------------------------------

def test_uniform_decode_is_one_plus_k_tokens_for_every_request():
    assert describe_batch([1, 1, 1]) == BatchDescriptor(3, 3, True)
    assert describe_batch([1, 1, 5]) == BatchDescriptor(7, 3, False)       # a prefill chunk: mixed
    assert describe_batch([3, 3]) == BatchDescriptor(6, 2, False)          # 3 tokens each, but k = 0
    assert describe_batch([3, 3], num_speculative_tokens=2) == BatchDescriptor(6, 2, True)
    assert describe_batch([1, 3], num_speculative_tokens=2).uniform is False
    assert describe_batch([1, 1], num_speculative_tokens=2).uniform is False  # short of 1 + k: not uniform


# --- dispatch: runtime mode and padding -------------------------------------------------------------------

def test_pads_up_to_the_next_capture_size_and_keeps_an_exact_fit():
    for n, want in [(1, 1), (3, 4), (4, 4), (5, 8), (9, 16), (17, 24), (25, 32), (32, 32)]:
        assert dispatch(M.PIECEWISE, SIZES, BatchDescriptor(n)) == Dispatched(M.PIECEWISE, want)
    assert dispatch(M.PIECEWISE, [8, 2, 4, 4, 1], [1, 2]) == (M.PIECEWISE, 4)  # sizes in any order


def test_above_the_largest_size_runs_without_a_graph_unpadded():
    for mode in M:
        assert dispatch(mode, SIZES, [1] * 33) == Dispatched(M.NONE, 33)
        assert dispatch(mode, SIZES, [30, 3]) == Dispatched(M.NONE, 33)


def test_full_and_piecewise_full_graph_for_decodes_piecewise_for_mixed():
    assert dispatch(M.FULL_AND_PIECEWISE, SIZES, [1, 1, 1]) == (M.FULL, 4)
    assert dispatch(M.FULL_AND_PIECEWISE, SIZES, [1, 1, 4]) == (M.PIECEWISE, 8)


def test_full_decode_only_runs_mixed_batches_without_a_graph():
    assert dispatch(M.FULL_DECODE_ONLY, SIZES, [1] * 5) == (M.FULL, 8)
    assert dispatch(M.FULL_DECODE_ONLY, SIZES, [1, 1, 4]) == (M.NONE, 6)  # unpadded


def test_full_runs_every_batch_in_a_full_graph_and_none_runs_none():
    assert dispatch(M.FULL, SIZES, [1, 7]) == (M.FULL, 8)
    assert dispatch(M.FULL, SIZES, [1, 1]) == (M.FULL, 2)
    assert dispatch(M.NONE, SIZES, [1, 1, 1]) == (M.NONE, 3)
    assert dispatch(M.PIECEWISE, SIZES, [1, 1, 1]) == (M.PIECEWISE, 4)  # uniform, but no full graphs


def test_spec_decode_batches_of_one_plus_k_take_the_full_decode_graph():
    sizes = [3, 6, 9, 12, 24]  # multiples of 1 + k = 3, as vLLM rounds them
    assert dispatch(M.FULL_AND_PIECEWISE, sizes, [3, 3], num_speculative_tokens=2) == (M.FULL, 6)
    assert dispatch(M.FULL_AND_PIECEWISE, sizes, [3] * 3, num_speculative_tokens=2) == (M.FULL, 9)
    assert dispatch(M.FULL_AND_PIECEWISE, sizes, [3] * 5, num_speculative_tokens=2) == (M.FULL, 24)
    # the same batch without spec decode is a mixed batch (3 tokens each is not one token each)
    assert dispatch(M.FULL_AND_PIECEWISE, sizes, [3, 3]) == (M.PIECEWISE, 6)
    assert dispatch(M.FULL_DECODE_ONLY, sizes, [3, 3]) == (M.NONE, 6)
    # a request with fewer than 1 + k tokens makes the batch mixed
    assert dispatch(M.FULL_AND_PIECEWISE, sizes, [3, 1], num_speculative_tokens=2) == (M.PIECEWISE, 6)


def test_spec_decode_with_sizes_not_multiples_of_one_plus_k_says_how_to_fix():
    with pytest.raises(InvalidArgumentError, match=r"multiple of 1 \+ k = 3.*adjust_cudagraph_sizes_for_spec_decode"):
        dispatch(M.FULL_AND_PIECEWISE, [1, 2, 4, 8], [3], num_speculative_tokens=2)
    assert dispatch(M.FULL_AND_PIECEWISE, [1, 2, 4, 8], [3, 1], num_speculative_tokens=2) == (M.PIECEWISE, 4)


def test_max_num_seqs_drops_decode_graphs_for_more_requests():
    assert dispatch(M.FULL_AND_PIECEWISE, [1, 2, 8], [1, 1, 1], max_num_seqs=4) == (M.PIECEWISE, 8)
    assert dispatch(M.FULL_AND_PIECEWISE, [1, 2, 8], [1, 1, 1], max_num_seqs=8) == (M.FULL, 8)
    assert dispatch(M.FULL_DECODE_ONLY, [1, 2, 8], [1, 1, 1], max_num_seqs=4) == (M.NONE, 3)


def test_a_descriptor_and_its_query_lengths_dispatch_alike():
    for lens in ([1, 1, 1], [2, 5], [1] * 20):
        assert dispatch(M.FULL_AND_PIECEWISE, SIZES, lens) == dispatch(M.FULL_AND_PIECEWISE, SIZES,
                                                                       describe_batch(lens))


# --- bad input: a clear error that says how to fix it ----------------------------------------------------

@pytest.mark.parametrize("call, words", [
    (lambda: resolve_mode("FULLY", S.ALWAYS), "one of NONE, PIECEWISE, FULL"),
    (lambda: resolve_mode(2, S.ALWAYS), "CUDAGraphMode.FULL_AND_PIECEWISE or 'full_and_piecewise'"),
    (lambda: resolve_mode(M.FULL, 3), "one of ALWAYS, UNIFORM_BATCH"),
    (lambda: resolve_mode(M.FULL, S.ALWAYS, num_speculative_tokens=-1), "at least 0"),
    (lambda: resolve_mode(M.FULL_AND_PIECEWISE, S.ALWAYS, attention_piecewise=False), "attention_piecewise=True"),
    (lambda: describe_batch([]), "e.g. [1, 1, 7]"),
    (lambda: describe_batch([1, 0]), "at least 1"),
    (lambda: describe_batch([1, 1.0]), "whole number"),
    (lambda: dispatch(M.FULL, [], [1]), "e.g. [1, 2, 4, 8]"),
    (lambda: dispatch(M.FULL, "1248", [1]), "list of token counts"),
    (lambda: dispatch(M.FULL, SIZES, 3), "list of query lengths per request"),
    (lambda: dispatch(M.FULL, SIZES, BatchDescriptor(5, 2, True)), "describe_batch(query_lens"),
    (lambda: BatchDescriptor(4, uniform=True), "needs num_reqs"),
    (lambda: BatchDescriptor(2, 3), "each request schedules one token or more"),
])
def test_bad_input_raises_a_value_error_that_says_how_to_fix_it(call, words):
    with pytest.raises(InvalidArgumentError) as err:
        call()
    assert isinstance(err.value, ValueError) and words in str(err.value)
