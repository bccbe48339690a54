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


def test_a_notebook_built_to_be_slow_to_parse_is_parsed_within_a_budget(monkeypatch) -> None:
    """Finding an answer parses each code cell once, and at most PARSE_BUDGET characters of code per notebook: a
    20 MB cell (or a hundred 200 KB ones) once took gigabytes and a minute per exercise of the grader's own process.
    The cells past the budget are read line by line, and the learner's answer is still found and graded."""
    import ast
    import json

    from graphcourse.grading import notebooks
    from graphcourse.grading.assignment import load_assignments
    from graphcourse.core.paths import ROOT

    a = next(a for a in load_assignments(ROOT / "solutions") if a.name == "06_exercises.ipynb")
    parsed: list[int] = []
    real_parse = ast.parse
    monkeypatch.setattr(notebooks.ast, "parse", lambda source, *a, **k: parsed.append(len(source)) or
                        real_parse(source, *a, **k))
    ex = next(e for e in a.exercises if e.id == "ex07_shared_pool")
    nb = json.loads((ROOT / "exercises" / "06_exercises.ipynb").read_text(encoding="utf-8"))
    junk = [{"cell_type": "code", "execution_count": None, "id": f"junk{i}", "metadata": {}, "outputs": [],
             "source": f"def helper{i}():\n    pass\nx{i} = [" + "1," * 99_000 + "]"} for i in range(20)]
    junk.append({**junk[0], "id": "big", "source": "y = [" + "1," * 2_000_000 + "]"})
    mine = {"cell_type": "code", "execution_count": None, "id": "mine", "metadata": {}, "outputs": [],
            "source": "def serve(pool, batches):\n    return [[0] for _ in batches]\n"}
    nb["cells"] = junk + nb["cells"] + [mine]
    cells, _meta, _notes = notebooks.parse(json.dumps(nb).encode(), "06_exercises.ipynb")
    assert sum(parsed) <= notebooks.PARSE_BUDGET and max(parsed) <= notebooks.MAX_PARSED
    assert cells[-1].names == {"serve"}  # the small cells first: the learner's own are always parsed
    assert {"helper19", "x19"} <= cells[19].names and cells[20].names == {"y"}  # read line by line
    before = len(parsed)
    answer = notebooks.find_answer(cells, ex.id, ex.names, ex.stub, a.given, set())
    assert len(parsed) == before, "find_answer parses nothing again"
    assert answer.source == mine["source"], answer


def test_top_level_names_read_line_by_line_match_the_parser_on_plain_code() -> None:
    from graphcourse.grading.notebooks import _defined_by_lines, _parsed_names

    source = ("import os\n\nLIMIT: int = 3\nTOTAL += 1\n\n\ndef serve(pool, batches):\n    inner = 1\n    return inner\n\n"
              "class Pool:\n    size = 2\n\n\nasync def fetch():\n    pass\n\nif LIMIT == 3:\n    pass\n")
    assert _defined_by_lines(source) == set(_parsed_names(source)) == {"LIMIT", "TOTAL", "serve", "Pool", "fetch"}


def test_the_graders_output_channel_is_bounded_before_it_connects(tmp_path) -> None:
    """A kernel that floods its output (32 MB messages in a loop for 3 s) once took the grader from about 100 MB to
    2.5 GB: its socket queued 1,000 messages. The grader's kernels get a client whose output socket holds at most
    IOPUB_QUEUE messages of IOPUB_MAX_MESSAGE bytes (the backlog waits in the kernel, whose memory is limited), set
    before it connects, when zmq applies them. An honest answer printing 50 MB keeps its marks
    (tests/test_grading_repeat.py)."""
    import zmq

    from graphcourse.grading import runner

    km = runner._KernelManager(transport="ipc", ip=str(tmp_path / "zmq"))
    km.write_connection_file()
    kc = km.client()
    assert isinstance(kc, runner._KernelClient)
    sock = kc.connect_iopub()
    try:
        assert sock.getsockopt(zmq.RCVHWM) == runner.IOPUB_QUEUE
        assert sock.getsockopt(zmq.MAXMSGSIZE) == runner.IOPUB_MAX_MESSAGE
        assert runner.IOPUB_QUEUE * runner.IOPUB_MAX_MESSAGE <= 256 * 1024 * 1024
    finally:
        sock.close(linger=0)
        km.cleanup_connection_file()


def test_a_kernel_keeping_the_tripwire_pipe_full_cannot_hold_the_grader(monkeypatch) -> None:
    """The grader reads the tripwire's pipe from its event loop. A kernel whose threads keep the pipe full must not
    keep it there: each turn reads at most TRIPWIRE_READS chunks, keeps at most TRIPWIRE_BUFFER bytes, and a record
    cut short waits for the rest of its line."""
    import json

    from graphcourse.grading import runner

    reads = []

    def endless(fd, n):  # a pipe that is never empty
        reads.append(n)
        if len(reads) > 10_000:
            raise AssertionError("the grader kept reading the pipe")
        return b"x" * (n - 1) + b"\n"

    kernel = runner.Kernel.__new__(runner.Kernel)
    kernel.tripwire_fd, kernel._pending, kernel._overflow = 99, bytearray(), False
    monkeypatch.setattr(runner.os, "read", endless)
    for _ in range(100):
        reads.clear()
        kernel._read_tripwire()
        assert len(reads) == runner.TRIPWIRE_READS
    assert len(kernel._pending) <= runner.TRIPWIRE_BUFFER and kernel._overflow

    chunks = [b'{"flag": 1}\n{"mark"', b': 2}\n{"obs": ', b""]
    monkeypatch.setattr(runner.os, "read", lambda fd, n: chunks.pop(0) if chunks else b"")
    kernel._pending, kernel._overflow = bytearray(), False
    assert kernel.tripwire() == [{"flag": 1}, {"mark": 2}] and bytes(kernel._pending) == b'{"obs": '
    chunks[:] = [b"3}\n", b""]
    assert kernel.tripwire() == [{"obs": 3}] and not kernel._pending
    assert json.dumps(kernel.tripwire()) == "[]"

    # a kernel writing millions of lines the tripwire never writes: counted and flagged, not kept
    chunks[:] = [b"{}\n" * 300_000, b'{"flag": "x"}\nnot json\n', b""]
    records = kernel.tripwire()
    assert len(records) <= 2 and all("flag" in r for r in records), records[:3]
    assert any("more records" in str(r["flag"]) for r in records)
    chunks[:] = [b'{}\n[1]\n{"mark": "c", "n": 1}\n', b""]
    records = kernel.tripwire()
    assert records == [{"mark": "c", "n": 1}, {"flag": "the tripwire's pipe carried 2 record(s) the tripwire does not "
                                                        "write"}], records
