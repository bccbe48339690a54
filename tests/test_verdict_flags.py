"""Run-time review flags a check's own code raises for the model answer too are not held against a learner."""

from graphcourse.grading.verdict import unexpected_flags

T = "threads still running: {} more than before the answer"


def test_threads_the_checks_own_code_starts_are_not_the_learners() -> None:
    assert unexpected_flags([T.format(2)], [T.format(2)]) == []
    assert unexpected_flags([T.format(1)], [T.format(2)]) == []
    assert unexpected_flags([T.format(3)], [T.format(2)]) == [T.format(3)], "more than the model's run left"
    assert unexpected_flags([T.format(1)], []) == [T.format(1)]


def test_other_flags_count_unless_the_model_raised_the_same() -> None:
    assert unexpected_flags(["builtins changed: print"], []) == ["builtins changed: print"]
    assert unexpected_flags(["events changed"], ["events changed"]) == []
    assert unexpected_flags(["events changed", "trace changed"], ["events changed"]) == ["trace changed"]
