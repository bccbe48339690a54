"""Kernels do not pile up (issue 21, item 13): `make lab` and the class server shut down idle kernels, and a kernel
whose lesson tab is closed.

The settings are read the way Jupyter reads them: a Jupyter Server application loading its config files from the
JUPYTER_CONFIG_PATH that `make lab` (bootstrap.lab_env) or the class server (coursehub.singleuser) sets. The last test starts a Jupyter Server with the course's config and a short timeout, opens a kernel as a tab
does, and sees it culled.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import bootstrap  # noqa: E402  (the set-up script at the repository root)

LAB_SETTINGS = ROOT / "graphcourse" / "lab_settings"
HUB_CONFIG = ROOT / "classroom" / "hub" / "jupyter-config"  # what coursehub.singleuser puts on JUPYTER_CONFIG_PATH
WANTED = {"cull_idle_timeout": 3600, "cull_interval": 300, "cull_connected": True, "cull_busy": False}

def server_config(env: dict, monkeypatch, tmp_path: Path) -> dict:
    """What a Jupyter Server started with env's JUPYTER_CONFIG_PATH reads from its config files (and no ~/.jupyter
    of the tester's): the kernel manager's cull settings, and JupyterLab's settings folder."""
    from jupyter_server.serverapp import ServerApp
    from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager

    monkeypatch.setenv("JUPYTER_CONFIG_PATH", env["JUPYTER_CONFIG_PATH"])
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "user-config"))
    app = ServerApp()  # a new instance, not the singleton: nothing is started
    app.load_config_file()
    km = AsyncMappingKernelManager(config=app.config)
    lab = app.config.LabApp
    return {"kernels": {k: getattr(km, k) for k in WANTED},
            "app_settings_dir": lab.app_settings_dir if "app_settings_dir" in lab else None}


def test_the_settings_are_ones_jupyter_has() -> None:
    """Each name is a real setting of the installed Jupyter Server and JupyterLab, so a rename is caught here."""
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager
    from jupyterlab.commands import get_app_dir

    assert set(WANTED) <= set(MappingKernelManager.class_own_traits()) | set(MappingKernelManager.class_traits())
    schema = Path(get_app_dir()) / "schemas" / "@jupyterlab" / "notebook-extension" / "tracker.json"
    assert json.loads(schema.read_text())["properties"]["kernelShutdown"]["type"] == "boolean"


def test_make_lab_culls_idle_kernels_and_shuts_a_closed_lessons_kernel(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    env = bootstrap.lab_env(str(tmp_path))
    assert server_config(env, monkeypatch, tmp_path)["kernels"] == WANTED
    cmd = bootstrap.lab_command("python", 8888)
    settings = Path(next(a for a in cmd if a.startswith("--LabApp.app_settings_dir=")).split("=", 1)[1])
    assert settings == LAB_SETTINGS
    overrides = json.loads((settings / "overrides.json").read_text())
    assert overrides["@jupyterlab/notebook-extension:tracker"]["kernelShutdown"] is True


def test_make_lab_keeps_a_jupyter_config_path_it_was_given(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path / "mine"))
    assert bootstrap.lab_env(str(tmp_path))["JUPYTER_CONFIG_PATH"].split(os.pathsep) == \
        [str(tmp_path / "mine"), str(LAB_SETTINGS)]


def test_the_class_server_culls_idle_kernels_as_make_lab_does(tmp_path, monkeypatch) -> None:
    found = server_config({"JUPYTER_CONFIG_PATH": str(HUB_CONFIG)}, monkeypatch, tmp_path)
    assert found["kernels"] == WANTED
    assert Path(found["app_settings_dir"]) == LAB_SETTINGS  # where kernelShutdown is (the test above)
    assert 'HERE / "jupyter-config"' in (ROOT / "classroom" / "hub" / "coursehub.py").read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


IDLE_S = 10  # long enough that a kernel slow to start under load is not culled before the tab connects


def test_an_idle_kernel_with_its_tab_open_is_culled(course_process, tmp_path) -> None:
    """A Jupyter Server with the course's config, the timeout cut to 10 s: a kernel with a connected client (an open
    lesson tab) that runs nothing is shut down."""
    port, token = _free_port(), secrets.token_hex(16)
    env = {**bootstrap.lab_env(str(tmp_path)), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", f"--port={port}", "--ip=127.0.0.1", "--no-browser",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}", "--ServerApp.port_retries=0",
         f"--MappingKernelManager.cull_idle_timeout={IDLE_S}", "--MappingKernelManager.cull_interval=1"]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"token {token}"}

    def api(path: str, method: str = "GET", body: bytes | None = None):
        req = urllib.request.Request(base + path, method=method, data=body, headers=headers)
        with urllib.request.urlopen(req, timeout=30) as response:
            return json.loads(response.read() or b"null")

    async def open_tab_and_wait(kernel_id: str) -> tuple[int, float]:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        # Tornado's default 20 s is too short for a kernel starting on a loaded machine (two suites side by side).
        ws = await websocket_connect(HTTPRequest(f"ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels",
                                                 headers=headers, connect_timeout=180, request_timeout=180))
        try:
            try:
                connections = api(f"/api/kernels/{kernel_id}")["connections"]
            except urllib.error.HTTPError as exc:
                pytest.fail(f"the kernel was gone before its tab had connected ({exc}): culled while the machine was "
                            f"slow to connect; IDLE_S ({IDLE_S} s) is too short here")
            start = time.monotonic()
            while time.monotonic() - start < 120:
                if kernel_id not in {k["id"] for k in api("/api/kernels")}:
                    return connections, time.monotonic() - start
                await asyncio.sleep(0.5)
            return connections, -1.0
        finally:
            ws.close()

    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                api("/api/status")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()[-3000:]
                time.sleep(0.5)
        kernel_id = api("/api/kernels", "POST", b"{}")["id"]
        connections, culled_after = asyncio.run(open_tab_and_wait(kernel_id))
        assert connections == 1, "the kernel had a client, as an open lesson tab"
        assert culled_after >= 0, "the idle kernel was never culled"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            out = proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out = proc.communicate()[0]
    assert "Culling kernels even with connected clients" in out, out[-3000:]
