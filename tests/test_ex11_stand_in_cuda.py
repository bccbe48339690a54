"""ex11's answers on a real reduce-overhead step and on the CPU stand-in: the same outcome, answer by answer.

The stand-in (``OutputsValidUntilNextCall``) must be as strict as torch where torch is strict: an answer that
feeds a compiled step's raw output back in fails at the second call on a GPU (CUDAGraph Trees free the warm-up
generation's outputs before they copy the next call's inputs), so it must fail on the stand-in too, and the
model answer must pass both. Each torch run is a child process (a fresh Dynamo and CUDA context). Skipped
without CUDA, except the stand-in half, which runs everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
import torch

from graphcourse.core.child import run_snippet
from graphcourse.core.exercise_format import find_regions, layout_of
from graphcourse.gpulib.compiled import OutputsValidUntilNextCall

ROOT = Path(__file__).resolve().parents[1]
WRONG = ROOT / "tests" / "wrong_answers" / "ex11_keep_compiled_outputs"
N, FIRST = 8, [5, 9]


def _model_answer() -> str:
    nb = nbformat.read(ROOT / "solutions" / "07_compile_and_control_flow.ipynb", as_version=4)
    ex = next(e for e in layout_of(nb, "07").exercises if e.id == "ex11_keep_compiled_outputs")
    source = nb.cells[ex.answer].source
    lines = source.splitlines()
    drop = {i for b, e, _i, _h in find_regions(source, "07") for i in (b, e)}
    return "\n".join(line for i, line in enumerate(lines) if i not in drop)


ANSWERS = {"model": _model_answer(), **{p.stem: p.read_text() for p in sorted(WRONG.glob("*.py"))}}
EXPECTED = []
_t = FIRST
for _ in range(N):
    _t = [(v * 31 + 7) % 97 for v in _t]
    EXPECTED.append(_t)


def _outcome(tokens_or_error) -> str:
    if isinstance(tokens_or_error, str):
        return "error: overwritten" if "overwritten by a subsequent run" in tokens_or_error else f"error: {tokens_or_error}"
    return "right" if tokens_or_error == EXPECTED else "wrong values"


def on_stand_in(answer: str):
    scope: dict = {}
    exec(answer, scope)  # noqa: S102  (the course's own answers)
    step = OutputsValidUntilNextCall(lambda v: [(t * 31 + 7) % 97 for t in v])
    try:
        outs = scope["generate"](step, list(FIRST), N)
        step(list(FIRST))  # one more call of the step, as the grader's check makes, before the outputs are read
        return [out.tolist() for out in outs]
    except RuntimeError as exc:
        return str(exc)


TORCH_RUN = '''
import json, torch
{answer}
torch._dynamo.reset()

@torch.compile(mode="reduce-overhead")
def step(tokens):
    return (tokens * 31 + 7) % 97

try:
    outs = generate(step, torch.tensor({first}, device="cuda"), {n})
    step(torch.tensor({first}, device="cuda"))  # one more call, as the grader's check makes, before reading
    out = [o.tolist() for o in outs]
except RuntimeError as exc:
    out = str(exc)
print("RESULT " + json.dumps(out))
'''


def on_torch(answer: str):
    done = run_snippet(TORCH_RUN.format(answer=answer, first=FIRST, n=N), 600)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, f"the child did not finish:\n{done.summary()}"
    return json.loads(line.removeprefix("RESULT "))


def test_on_the_stand_in_only_the_model_answer_is_right() -> None:
    outcomes = {name: _outcome(on_stand_in(a)) for name, a in ANSWERS.items()}
    assert outcomes.pop("model") == "right"
    assert "right" not in outcomes.values(), outcomes


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_torch_and_the_stand_in_agree_on_each_answer(name: str) -> None:
    real, stand_in = _outcome(on_torch(ANSWERS[name])), _outcome(on_stand_in(ANSWERS[name]))
    print(f"{name}: torch {real}; stand-in {stand_in}")
    if name == "model":
        assert real == stand_in == "right"
    else:  # torch may overwrite silently where the stand-in raises (a replay's output): both must be wrong
        assert real != "right" and stand_in != "right", (real, stand_in)
        if name == "feeds_raw_output":
            assert real == stand_in == "error: overwritten", "the strictness this stand-in copies from torch"
