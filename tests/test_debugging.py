"""Lesson 11 on any machine: the bisection and layer-comparison helpers, the toy twins, and the recorded GPU reports."""

from __future__ import annotations

import json
import math
import re

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcourse.core.paths import DATA_DIR, NOTEBOOKS_DIR
from graphcourse.gpulib.debugging import CAPTURE_FAILURES, FORTY_OPS_GUILTY, bisect_first_failure, first_divergence
from graphcourse.lessons import debugging as lesson

LESSON = NOTEBOOKS_DIR / "11_when_a_graph_goes_wrong.ipynb"
RECORDED = json.loads((DATA_DIR / "debugging.json").read_text())


def _text() -> str:
    return "\n".join(c.source for c in nbformat.read(LESSON, as_version=4).cells if c.cell_type == "markdown")


# --- bisection -------------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_bisection_finds_the_first_failing_step_in_at_most_one_plus_log2_n_tries(case):
    n, guilty = case  # guilty == n: no step fails
    calls = []

    def fails(k):
        calls.append(k)
        return "refused" if k > guilty else None

    found = bisect_first_failure(n, fails)
    assert found.first_bad == (guilty if guilty < n else None)
    assert len(found.tries) == len(calls) <= 1 + math.ceil(math.log2(n))
    assert all(0 < k <= n for k in calls), "only non-empty prefixes of the steps are captured"
    if guilty < n:
        assert found.error == "refused"


def test_bisection_refuses_an_empty_region_with_a_clear_error():
    with pytest.raises(ValueError, match="nothing to bisect"):
        bisect_first_failure(0, lambda k: None)


def test_the_toy_bisection_names_the_guilty_op_wherever_it_is():
    for guilty in (0, 1, 27, 39):
        found = lesson.toy_bisect(40, guilty)
        assert found.first_bad == guilty
        assert "CaptureError" in found.error and ".item()" in found.error
    nothing = lesson.toy_bisect(40, 99)
    assert nothing.first_bad is None and len(nothing.tries) == 1
    assert "the capture is not what fails" in nothing.lines()[-1]


# --- layer by layer --------------------------------------------------------------------------------------

def test_first_divergence_uses_allclose_rule_and_names_the_first_differing_layer():
    eager = {"a": [1.0, 2.0], "b": [3.0], "c": [0.0]}
    assert first_divergence(eager, {"a": [1.0, 2.0 + 1e-7], "b": [3.0], "c": [0.0]})[0] is None
    first, gaps = first_divergence(eager, {"a": [1.0, 2.0], "b": [3.5], "c": [9.0]})
    assert first == "b" and gaps == {"a": 0.0, "b": 0.5, "c": 9.0}
    assert first_divergence(eager, {"a": [1.0, 1.0], "b": [3.5], "c": [0.0]})[0] == "a", "a negative gap counts too"
    with pytest.raises(KeyError, match="record the same layers"):
        first_divergence(eager, {"a": [1.0, 2.0]})
    with pytest.raises(ValueError, match="1 values eagerly, 2 in the graph"):
        first_divergence({"b": [3.0]}, {"b": [3.0, 3.0]})


def test_toy_layers_names_the_layer_that_baked_the_python_value():
    found = lesson.toy_layers([1.0, -2.0, 3.0], factor_after=0.5)
    assert found["first_divergent"] == "scale"
    assert found["eager"]["fc1"] == found["graphed"]["fc1"]
    assert found["graphed"]["scale"] == found["graphed"]["fc1"], "the replay still multiplies by 1.0"
    assert lesson.toy_layers(factor_after=1.0)["first_divergent"] is None


# --- what the recording holds, and what the lesson says of it -------------------------------------------

def test_the_recording_has_provenance_and_no_paths_of_a_machine():
    p = RECORDED["provenance"]
    assert p["gpu_name"] and p["torch"] and p["driver"] and p["command"] == lesson.COMMAND
    text = json.dumps(RECORDED)
    assert not re.search(r"/(root|home|work|tmp)/", text)


def test_recorded_capture_failures_are_the_errors_the_lesson_names():
    failures = RECORDED["capture_failures"]
    assert set(failures) == set(CAPTURE_FAILURES)
    for found in failures.values():
        assert not found["captured"]
    sync = failures["a sync: .item() in the step"]["errors"]
    assert "operation not permitted when stream is capturing" in sync[0]
    assert "operation failed due to a previous error during capture" in sync[-1]
    pinned = failures["a constant made from a Python list"]["errors"]
    assert "unless the CPU tensor is pinned" in pinned[0]
    alloc = failures["an allocation on a stream outside the capture"]["errors"]
    assert "operation not permitted when stream is capturing" in alloc[0]
    text = _text()
    assert "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned" in text


def test_recorded_bisection_and_the_sentences_that_read_it():
    b = RECORDED["bisect"]
    toy = lesson.toy_bisect(40, 27)
    assert b["first_bad"] == b["guilty"] == FORTY_OPS_GUILTY == 27
    text = _text()
    bound = 1 + math.ceil(math.log2(40))
    assert f"1 + ⌈log2 40⌉ = {bound} captures" in text and f"At most 1 + ceil(log2 40) = {bound} captures" in text
    needed = {len(b["tries"]), len(toy.tries)}
    assert needed == {6}, needed
    assert "The toy and the H200 needed 6." in text


def test_recorded_freed_input_runs_match_the_lesson():
    reused, returned, blocking = (RECORDED[k] for k in ("freed_reused", "freed_returned", "freed_returned_blocking"))
    assert reused["returncode"] == 0 and reused["printed"][-1] == "replay with x freed: [11.0, 11.0, 11.0]"
    assert "a new tensor got x's old block: True" in reused["printed"]
    for found in (returned, blocking):
        assert found["returncode"] == 1 and "an illegal memory access was encountered" in found["errors"][0]
    assert returned["replay_returned"] and not blocking["replay_returned"], \
        "the fault surfaces at synchronize(), and at replay() with CUDA_LAUNCH_BLOCKING=1"
    assert "computed `2 * 5 + 1 = 11`" in _text()


def test_recorded_sanitizer_reports_match_the_lesson():
    san, san_r = RECORDED["sanitizer"], RECORDED["sanitizer_reused"]
    assert san["first_error"].startswith("Invalid __global__ read") and "MulFunctor" in san["kernel"]
    assert int(re.search(r"(\d+) errors", san["summary"]).group(1)) > 0
    assert san_r["summary"] == "ERROR SUMMARY: 0 errors" and san_r["returncode"] == 0
    assert san_r["printed"][-1] == "replay with x freed: [11.0, 11.0, 11.0]"
    text = _text()
    assert "`MulFunctor`" in text and "memcheck reports 0 errors while the program prints 11s" in text


def test_recorded_layers_and_liveness_gate():
    layers = RECORDED["layers"]
    assert layers["first_divergent"] == "scale" and layers["max_abs_gap"]["fc1"] == 0.0
    live = RECORDED["liveness_check"]
    assert live["torch"].startswith("2.11") and live["check_input_liveness"] is False
    assert "torch 2.11 lacks it" in _text()


def test_lesson_readers_say_when_nothing_is_recorded(tmp_path):
    data, label = lesson.recorded(tmp_path / "absent.json")
    assert data is None and "not recorded yet" in label and lesson.COMMAND in label
    for show in (lesson.capture_failure_lines, lesson.freed_lines, lesson.sanitizer_lines, lesson.layer_lines):
        assert show(None) == "not recorded yet"
    assert lesson.sanitizer_lines({"error": "compute-sanitizer is not installed here"}).startswith(
        "compute-sanitizer could not run")


def test_run_snippet_gives_the_child_extra_environment_variables_and_leaves_ours_alone():
    import os

    from graphcourse.core.child import run_snippet

    done = run_snippet("import os; print(os.environ['COURSE_EMPTY_CACHE'], os.environ['PYTHONUNBUFFERED'])",
                       env={"COURSE_EMPTY_CACHE": "1"})
    assert done.ok and done.stdout.split() == ["1", "1"]
    assert "COURSE_EMPTY_CACHE" not in os.environ


def test_the_recordings_are_written_whole_and_summarised_as_the_course_summarises_repeats(tmp_path):
    from graphcourse.gpulib.below_torch import spread, write_json

    target = tmp_path / "rec.json"
    write_json(target, {"provenance": {"command": "x"}, "t": spread([3.0, 1.0, 2.0])})
    assert json.loads(target.read_text()) == {"provenance": {"command": "x"},
                                              "t": {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}}
    assert [p.name for p in tmp_path.iterdir()] == ["rec.json"], "no temporary file left behind"
