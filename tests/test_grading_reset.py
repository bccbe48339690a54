"""Between two exercises in one kernel, the grader's reset restores the warning filters an answer changed.

A namespace reset (IPython's ``reset``) leaves module state alone: an answer that appended
``warnings.filterwarnings("ignore")`` would otherwise change what a later exercise's checks see
in the same kernel. The grader's preamble saves the filters of the fresh kernel; its reset restores
them; replacing ``warnings.showwarning`` shows in the kernel snapshot (a review flag).
"""

from __future__ import annotations

import json
import os

import pytest

from graphcourse.grading import observe
from graphcourse.grading.runner import RESET, preamble

jupyter_client = pytest.importorskip("jupyter_client")


def _run(client, code: str) -> str:
    """Run code in the kernel, return its stdout; fail on an error."""
    out: list[str] = []
    msg_id = client.execute(code)
    while True:
        msg = client.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream" and content["name"] == "stdout":
            out.append(content["text"])
        elif kind == "error":
            raise AssertionError(f"{content['ename']}: {content['evalue']}")
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out)


def test_an_answers_warning_filter_does_not_reach_the_next_exercise(tmp_path):
    pipe = tmp_path / "tripwire"
    os.mkfifo(pipe, 0o600)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    km, client = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        filters = "import warnings, json; print(json.dumps([repr(f) for f in warnings.filters]))"
        _run(client, preamble(["json"], str(pipe)))
        fresh = json.loads(_run(client, filters))
        _run(client, "import warnings\nwarnings.filterwarnings('ignore')\nwarnings.simplefilter('error', UserWarning)")
        assert json.loads(_run(client, filters)) != fresh
        _run(client, RESET)
        assert json.loads(_run(client, filters)) == fresh
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
        os.close(reader)


def test_replacing_showwarning_is_a_difference_the_snapshot_sees(monkeypatch):
    before = observe._snapshot()
    monkeypatch.setattr("warnings.showwarning", lambda *a, **k: None)
    assert any("warnings" in line for line in observe._differences(before, observe._snapshot()))


def test_a_change_made_past_the_seals_shows_in_the_snapshot():
    """The seals cannot stop a base type's own method (``list.append(seq, x)``, ``dict.update(table, ...)``) called on
    a sealed list or table; the comparison of the kernel before and after the answer still sees what it changed."""
    km, client = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        _run(client, "from graphcourse.grading import observe\nbefore = observe._snapshot()")
        _run(client, "import ast\nlist.append(get_ipython().ast_transformers, ast.NodeTransformer())\n"
                     "dict.update(get_ipython().kernel.shell_handlers, not_a_request=print)")
        found = json.loads(_run(client, "import json\nprint(json.dumps(observe._differences(before, "
                                        "observe._snapshot())))"))
        assert "ast_transformers changed" in found and "kernel.handlers changed" in found, found
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
