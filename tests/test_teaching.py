"""The lesson helpers print errors and warnings as one line, and describe the machine honestly."""

import warnings

from graphcourse.lessons.teaching import course_plan, describe_machine, expect_error, show_warnings
from toygraph import ShapeMismatchError


def test_expect_error_prints_name_and_message(capsys):
    with expect_error(ShapeMismatchError):
        raise ShapeMismatchError(1, 17)
    out = capsys.readouterr().out
    assert out.startswith("ShapeMismatchError: captured for batch size 1") and "Traceback" not in out


def test_expect_error_says_when_nothing_failed(capsys):
    with expect_error():
        pass
    assert "No error was raised" in capsys.readouterr().out


def test_expect_error_lets_other_errors_through():
    try:
        with expect_error(ShapeMismatchError):
            raise KeyError("x")
    except KeyError:
        return
    raise AssertionError("a KeyError should not be swallowed when only ShapeMismatchError is expected")


def test_show_warnings_prints_without_paths(capsys):
    with show_warnings():
        warnings.warn("add a bucket", UserWarning)
    assert capsys.readouterr().out == "UserWarning: add a bucket\n"


def test_describe_machine_on_this_cpu_only_machine():
    info = describe_machine()
    assert info["python"].count(".") == 2
    import torch
    assert info["torch"] == torch.__version__
    assert (info["gpu"] == "none") == (not torch.cuda.is_available())
    assert "recorded results" in course_plan({**info, "gpu": "none"})
    assert "NVIDIA H100" in course_plan({**info, "gpu": "NVIDIA H100"})


def test_show_warnings_drops_where_torch_warned_from(capsys):
    with show_warnings():
        warnings.warn("Synchronization debug mode is a prototype feature (Triggered internally at "
                      "/pytorch/torch/csrc/cuda/Module.cpp:1003.)", UserWarning)
    assert capsys.readouterr().out == "UserWarning: Synchronization debug mode is a prototype feature\n"


def test_cells_tagged_strip_output_are_stored_without_the_builders_answers(tmp_path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from graphcourse.authoring.execute import STRIP_TAG, execute_notebook

    nb = new_notebook(cells=[new_code_cell("print('this machine: builder')"), new_code_cell("print('kept')")])
    nb.cells[0].metadata["tags"] = [STRIP_TAG]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    execute_notebook(path, timeout_s=120)
    stored = nbformat.read(path, as_version=4)
    assert stored.cells[0].outputs == [] and stored.cells[0].execution_count is None
    assert "kept" in stored.cells[1].outputs[0]["text"]


def test_lesson_00_is_stored_without_any_machines_answers() -> None:
    import nbformat
    from pathlib import Path

    from graphcourse.authoring.execute import STRIP_TAG

    nb = nbformat.read(Path(__file__).resolve().parent.parent / "notebooks" / "00_setup_check.ipynb", as_version=4)
    checks = [c for c in nb.cells if c.cell_type == "code" and "describe_machine" in c.source or "course_plan(" in c.source]
    assert checks and all(STRIP_TAG in c.metadata.get("tags", []) and not c.outputs for c in checks)
