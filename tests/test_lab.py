"""`make lab` serves JupyterLab: start it on loopback with a token, fetch its page, stop it."""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_the_course(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws")}
    proc = subprocess.Popen(
        ["make", "-s", "lab", f"PORT={port}", f"LAB_ARGS=--no-browser --ServerApp.token={token}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        page, deadline = "", time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=5) as response:
                    page = response.read().decode()
                    break
            except OSError:
                time.sleep(0.5)
        assert proc.poll() is None, f"make lab exited early:\n{proc.stdout.read()[-3000:]}"
        assert "JupyterLab" in page and re.search(r'"notebookDir"|jupyter-config-data', page)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token={token}", timeout=5) as response:
            listing = response.read().decode()
        assert "01_the_big_idea.ipynb" in listing, "JupyterLab opens on notebooks/"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
