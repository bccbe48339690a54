"""graphcourse.gpulib.device_loop on a CPU: K steps per launch give lesson 05's tokens; end-of-sequence is masked on the device."""

from __future__ import annotations

import json

import pytest
import torch

from graphcourse.gpulib.device_loop import (DeviceLoopError, MultiStepDecoder, decode_k_steps,
                                            LoopState, torch_features)
from graphcourse.gpulib.graphs import GPTConfig, TinyGPT, greedy_tokens_cached

SMALL = GPTConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=2, max_len=32)


@pytest.fixture(scope="module")
def model() -> TinyGPT:
    return TinyGPT(SMALL, seed=1)


@pytest.fixture(scope="module")
def prompt() -> torch.Tensor:
    return torch.randint(0, SMALL.vocab_size, (3, 4), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("k", [1, 3, 8])
def test_k_steps_per_launch_give_the_one_step_loops_tokens(model: TinyGPT, prompt: torch.Tensor, k: int) -> None:
    reference = greedy_tokens_cached(model, prompt, 12)
    decoder = MultiStepDecoder(model, 3, k)
    decoder.start(prompt)
    assert torch.equal(decoder.generate(12), reference)
    assert decoder.launches == -(-12 // k)
    assert len(set(reference.flatten().tolist())) > 3, "a test on a constant token sequence would prove little"


def test_a_finished_sequence_keeps_emitting_eos_and_the_others_run_on(model: TinyGPT, prompt: torch.Tensor) -> None:
    reference = greedy_tokens_cached(model, prompt, 12)
    eos = int(reference[0, 2])  # sequence 0 emits it at step 2
    decoder = MultiStepDecoder(model, 3, 4, eos_id=eos)
    decoder.start(prompt)
    got = decoder.generate(12)
    for row in range(3):
        ref = reference[row].tolist()
        first = ref.index(eos) if eos in ref else len(ref)
        assert got[row, : first + 1].tolist() == ref[: first + 1], "tokens up to and including eos are unchanged"
        assert set(got[row, first:].tolist()) <= {eos}, "after eos only eos"
    assert bool(decoder.state.done[0])


def test_running_past_the_cache_is_refused_before_launching(model: TinyGPT, prompt: torch.Tensor) -> None:
    decoder = MultiStepDecoder(model, 3, 8)
    decoder.start(prompt)  # position 3 of 32
    decoder.generate(24)   # positions 3..26
    pos = int(decoder.state.pos)
    with pytest.raises(DeviceLoopError, match="run past the KV cache"):
        decoder.launch()
    assert int(decoder.state.pos) == pos, "nothing ran"


@pytest.mark.parametrize("kwargs, match", [
    ({"k": 0}, "whole number"), ({"k": 2.5}, "whole number"), ({"k": 64}, "exceed"),
    ({"k": 2, "skip_done_steps": True}, "needs an eos_id"),
])
def test_bad_arguments_get_a_clear_error(model: TinyGPT, kwargs: dict, match: str) -> None:
    with pytest.raises(DeviceLoopError, match=match):
        MultiStepDecoder(model, 2, **kwargs)


def test_a_prompt_of_the_wrong_batch_is_refused(model: TinyGPT) -> None:
    decoder = MultiStepDecoder(model, 2, 2)
    with pytest.raises(DeviceLoopError, match=r"batch=2"):
        decoder.start(torch.zeros(3, 4, dtype=torch.long))


def test_a_graph_on_a_cpu_model_is_refused(model: TinyGPT) -> None:
    with pytest.raises(DeviceLoopError, match="CUDA device"):
        MultiStepDecoder(model, 2, 2, use_graph=True)


def test_decode_k_steps_refuses_more_steps_than_output_columns(model: TinyGPT) -> None:
    state = LoopState.allocate(1, 2, "cpu")
    with pytest.raises(DeviceLoopError, match="do not fit"):
        decode_k_steps(model.decode_step, state, model.new_cache(1), 3)


def test_torch_features_is_plain_data_naming_what_the_lessons_use() -> None:
    features = torch_features()
    assert json.loads(json.dumps(features)) == features
    for key in ("torch.cond", "CUDAGraph.begin_capture_to_if_node", "CUDAGraph.begin_capture_to_while_node",
                "torch.compiler.cudagraph_mark_step_begin", "conditional_nodes_usable_here"):
        assert key in features
    if not torch.cuda.is_available():
        assert features["conditional_nodes_usable_here"] is False
