"""What an exception says reaches the learner, and nothing an answer's exception class defines ever runs to say it.

`observe.call` records only the exception's name (`{"raised": "toygraph.CaptureError"}`: compared, hashed into the
self-check data); its message travels beside the record, for display only, and is read from the args slot of
built-in and toygraph exceptions alone (observe.exception_message).
"""

from __future__ import annotations

import contextlib
import io

import nbformat

from graphcourse.authoring import build_exercises as be
from graphcourse.authoring import selfcheck
from graphcourse.grading import observe as observe_module
from graphcourse.grading.assignment import Check
from graphcourse.grading.verdict import compare

BOOK = be.EXERCISES_DIR / "06_exercises.ipynb"

CAPTURES_A_SYNC = '''
def decode_step(tok):
    tok = launch(next_token, tok, name="model")
    tok.item()  # a sync inside the captured step: the toy refuses, and says why
    return tok


def decode_on_device(dev, first_token, steps):
    return decode_with_sync(dev, first_token, steps)
'''


def _given_cells(exercise: str) -> dict:
    """A namespace after the set-up and given cells of one exercise of 06_exercises (as a learner's kernel has it)."""
    ns: dict = {"__name__": "__main__"}
    for cell in nbformat.read(BOOK, as_version=4).cells:
        meta = cell.get("metadata", {}).get("graphcourse", {})
        if cell.cell_type == "code" and (meta.get("role") == "setup" or
                                         meta.get("role") == "context" and meta.get("exercise", "").startswith(exercise)):
            with contextlib.redirect_stdout(io.StringIO()):
                exec(cell.source, ns)
    return ns


def test_a_self_check_shows_the_toys_explanation_of_a_capture_error(capsys):
    ns = _given_cells("ex03")
    exec(CAPTURES_A_SYNC, ns)
    capsys.readouterr()
    results = selfcheck.check("ex03", namespace=ns)
    out = capsys.readouterr().out
    status, reasons = results["ex03_remove_the_sync/step_captures"]
    assert status == "differs"
    assert "raised toygraph.CaptureError: operation not permitted when stream is capturing" in out, out
    assert ".item() makes the CPU wait for the GPU" in out  # the toy's own words, which teach the fix
    # the recorded observation is the name alone: the hashed, compared record did not change
    recorded = observe_module.observe.recorded()["ex03_remove_the_sync/step_captures"]["capture decode_step"]
    assert recorded == {"raised": "toygraph.CaptureError"}


class _Calls:
    n = 0


def _hostile_class(base: type) -> type:
    def speak(self):
        _Calls.n += 1
        raise SystemExit("a hostile __str__ ran")

    return type("Hostile", (base,), {"__str__": speak, "__repr__": speak, "__format__": lambda s, f: speak(s)})


def test_an_answers_own_exception_class_shows_no_message_and_none_of_its_methods_run(capsys):
    from toygraph import CaptureError

    for base in (ValueError, CaptureError):
        hostile = _hostile_class(base)
        _Calls.n = 0
        exc = hostile("a message the class would have printed")
        assert observe_module.exception_message(exc) is None
        ns: dict = {"__name__": "__main__"}

        def decode_on_device(dev, first_token, steps, hostile=hostile):
            raise hostile("secret words")

        ns["decode_on_device"] = decode_on_device
        ns["decode_step"] = lambda tok: (_ for _ in ()).throw(hostile("secret words"))
        results = selfcheck.check("ex03", namespace=ns)
        out = capsys.readouterr().out
        assert _Calls.n == 0, "the answer's __str__/__repr__ ran"
        assert "secret words" not in out and "hostile" not in out.lower()
        assert any(f"raised {'ValueError' if base is ValueError else 'toygraph.CaptureError'}" in r
                   for _, rs in results.values() for r in rs), out


def test_a_hostile_exception_escaping_a_check_is_named_without_running_its_code():
    hostile = _hostile_class(RuntimeError)
    _Calls.n = 0
    check = {"id": "exXX/escapes", "source": "boom()"}

    def boom():
        raise hostile("secret words")

    _, _, error = selfcheck.run_check(check, {"__name__": "__main__", "boom": boom})
    assert error == "RuntimeError" and _Calls.n == 0
    _, _, error = selfcheck.run_check(check, {"__name__": "__main__", "boom": lambda: int("x1")})
    assert error == "ValueError: invalid literal for int() with base 10: 'x1'"


def test_only_str_args_are_shown_and_they_are_cut():
    class Key:
        def __repr__(self):
            _Calls.n += 1
            return "ran"

    _Calls.n = 0
    assert observe_module.exception_message(KeyError(Key())) is None and _Calls.n == 0
    long = observe_module.exception_message(ValueError("x" * 10_000))
    assert len(long) == observe_module.MAX_SAID and long.endswith("...")


def test_the_grader_shows_the_message_beside_raised_but_compares_the_name_alone():
    check = Check(id="ex03_remove_the_sync/step_captures", name="step_captures", source="", points=2, hidden=False,
                  needs=(), tolerance=0.0, number=4)
    model = {"capture decode_step": {"value": None}}
    learner = {"capture decode_step": {"raised": "toygraph.CaptureError"}}
    ok, why = compare(check, model, learner, {}, {"capture decode_step": "operation not permitted when capturing"})
    assert not ok and "raised toygraph.CaptureError (operation not permitted when capturing)" in why
    same = {"capture decode_step": {"raised": "toygraph.CaptureError"}}
    assert compare(check, same, learner, {}, {"capture decode_step": "any words at all"}) == (True, "")


IPYTHON_TRACEBACK = (
    "\x1b[31m---------------------------------------------------------------------------\x1b[39m\n"
    "\x1b[31mAssertionError\x1b[39m                            Traceback (most recent call last)\n"
    "\x1b[36mCell\x1b[39m\x1b[36m \x1b[39m\x1b[32mIn[1]\x1b[39m\x1b[32m, line 7\x1b[39m\n"
    "\x1b[32m      4\x1b[39m     exec(compile('observe(...)', '<check ex03/one_sync>', 'exec'), globals())\n"
    "\x1b[32m----> \x1b[39m\x1b[32m7\x1b[39m __selfcheck._verify(\x1b[33m'ex03/one_sync'\x1b[39m)\n\n"
    "\x1b[36mFile \x1b[39m\x1b[32m/x/graphcourse/authoring/selfcheck.py:371\x1b[39m, in \x1b[36m_verify\x1b[39m\n"
    "\x1b[32m--> \x1b[39m\x1b[32m371\x1b[39m     raise AssertionError(...)\n\n"
    "\x1b[31mAssertionError\x1b[39m: ex03/one_sync differs from the model answer:\n  syncs for 5, 8 steps: differs\n")


def test_a_kernel_traceback_loses_its_colours_and_the_self_checks_plumbing():
    frames, error = selfcheck.plain_traceback(IPYTHON_TRACEBACK)
    assert "\x1b" not in frames + error and "exec(compile(" not in frames and "_verify" not in frames
    assert error == "AssertionError: ex03/one_sync differs from the model answer:\n  syncs for 5, 8 steps: differs"


def test_make_check_reports_a_failure_as_the_check_and_your_cell_without_colours(course_process, tmp_path):
    """`make check`'s pytest run on a copy whose ex03 answer syncs every step and whose other cell raises: the
    failures read as the check's reasons and the learner's cell with its error line; no ANSI codes, no wrapper."""
    import os
    import subprocess
    import sys

    nb = nbformat.read(BOOK, as_version=4)
    keep = [c for c in nb.cells if c.cell_type == "code" and (
        c.metadata.get("graphcourse", {}).get("role") == "setup"
        or c.metadata.get("graphcourse", {}).get("exercise", "").startswith("ex03"))]
    for c in keep:
        if c.metadata["graphcourse"].get("role") == "answer":
            c.source = ("def decode_step(tok):\n    return launch(next_token, tok, name='model')\n\n\n"
                        "def decode_on_device(dev, first_token, steps):\n    return decode_with_sync(dev, first_token, steps)\n"
                        "\n\nbroken = 1\nraise ValueError('a line of mine that breaks')\n")
    nb.cells = keep
    nbformat.write(nb, tmp_path / BOOK.name)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(be.ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "pytest", "-v", "--no-header", "-p", "graphcourse.authoring.selfcheck",
                          "-p", "no:randomly", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
                          "--color=no", BOOK.name], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    out = run.stdout
    failures = out[out.index("FAILURES"):]
    assert "\x1b" not in out and "exec(compile(" not in failures and "Notebook cell execution failed" not in out, failures
    assert "ex03_remove_the_sync/one_sync differs from the model answer:\n  syncs for" in failures, failures
    assert "_ 06_exercises.ipynb::ex03_remove_the_sync/one_sync _" in failures  # named, not "Cell 5"
    assert "ex03_remove_the_sync/your answer raised an error" in failures
    assert "---> 10 raise ValueError('a line of mine that breaks')" in failures.replace("----> ", "---> ")
    assert "ValueError: a line of mine that breaks" in failures


def _ex01_answer_cell() -> str:
    return next(c.source for c in nbformat.read(BOOK, as_version=4).cells
                if c.get("metadata", {}).get("graphcourse", {}).get("role") == "answer"
                and c.metadata["graphcourse"]["exercise"].startswith("ex01"))


def _ex01_lines(capsys, ns: dict) -> tuple[dict, list[str]]:
    capsys.readouterr()
    results = selfcheck.check("ex01", namespace=ns)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if not ln.startswith("visible checks matching")]
    return results, lines


def test_the_untouched_stub_says_not_answered_in_one_line(capsys):
    ns = _given_cells("ex01")
    exec(_ex01_answer_cell(), ns)  # the stub: every function raises NotImplementedError
    results, lines = _ex01_lines(capsys, ns)
    assert lines == [("ex01_bucket_picker: not answered yet: write pick_bucket and pad_batch in the answer cell, "
                      "run it, then check again")], lines
    assert results and all(status != "passed" for status, _ in results.values())  # the verdicts are still kept


def test_an_unrun_answer_cell_says_run_it_first(capsys):
    _, lines = _ex01_lines(capsys, _given_cells("ex01"))
    assert lines == [("ex01_bucket_picker: run your answer cell first (name 'pick_bucket' is not defined), "
                      "then check again")], lines


def test_a_wrong_answer_keeps_the_per_check_report_with_each_hint_once(capsys):
    ns = _given_cells("ex01")
    exec(_ex01_answer_cell(), ns)
    exec("def pick_bucket(batch_size, buckets):\n    return max(buckets)\n", ns)  # wrong; pad_batch still a stub
    results, lines = _ex01_lines(capsys, ns)
    out = "\n".join(lines)
    assert lines[0] == "ex01_bucket_picker" and "  FAIL smallest_bucket (1 point)" in lines, out
    assert results["ex01_bucket_picker/smallest_bucket"][0] == "differs"
    assert "bucket for 1 of [1, 2, 4, 8, 16, 32]: differs from the model answer" in out
    assert out.count("hint: the smallest bucket that is at least the batch size") == 1, out
    assert "not answered yet: write pad_batch in the answer cell" in out  # the stubbed check, in one line
    del ns["pad_batch"]  # a name the answer cell defines, missing: say so, not a bare NameError
    _, lines = _ex01_lines(capsys, ns)
    assert any("could not finish: run your answer cell first (name 'pad_batch' is not defined)" in ln
               for ln in lines), lines
