"""The static review of an answer is bounded: a notebook built to make it slow is held for review, never waited on."""

import time

from graphcourse.grading.scan import MAX_CHARS, scan


def _fast(source: str, limit_s: float = 15.0) -> list[str]:
    start = time.monotonic()
    flags = scan(source)
    assert time.monotonic() - start < limit_s, "the scan took too long"
    return flags


def test_many_magic_lines_are_read_in_linear_time() -> None:
    source = "\n".join(f"%time x{i} = {i}" for i in range(60_000))
    flags = _fast(source[:MAX_CHARS - 1])
    assert flags and flags[0].startswith("line 1: a shell or magic command")
    assert "line 2: a shell" in flags[1], "each line is named by its own number"


def test_an_answer_too_long_to_read_is_held_with_the_reason() -> None:
    flags = _fast("x = 1\n" * (MAX_CHARS // 6 + 10))
    assert len(flags) == 1 and "too long to review automatically" in flags[0]


def test_a_long_attribute_chain_does_not_cost_quadratic_time() -> None:
    chain = "a" + ".b" * 500
    flags = _fast("a = object()\n" + "\n".join(f"{chain}.c{i} = 1" for i in range(30)))
    assert flags == []  # a is the answer's own


def test_past_its_time_budget_the_review_stops_and_says_so() -> None:
    source = "\n".join(f"v{i} = w{i}.attr{i}" for i in range(5_000))
    flags = scan(source, time_s=0.0)
    assert any("ran past" in f for f in flags)


def test_a_plain_answer_is_unchanged() -> None:
    assert scan("def add(a, b):\n    return a + b\n") == []
    assert scan("import os\n") == ["line 1: imports os"]
    assert scan("f.__code__.replace(co_code=b'')\n") != []
