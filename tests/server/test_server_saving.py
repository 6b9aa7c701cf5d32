"""The server extension: enabled on install, and a saved notebook keeps no live nbagent widget reference."""

from __future__ import annotations

import copy
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from nbagent.render.live_views import LIVE, WIDGET_VIEW, pre_save, unlink_live_views


def widget_output(model_id: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "output_type": "display_data",
        "data": {WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id}, "text/plain": "replay"},
        "metadata": metadata if metadata is not None else LIVE,
    }


STATIC = {"output_type": "display_data", "data": {"text/html": "<div class='nbagent-transcript'>x</div>"}, "metadata": {}}

# (what the cell's outputs are, which model ids remain after saving)
CASES = {
    "a live nbagent view loses its model id": ([STATIC, widget_output("abc")], [None, ""]),
    "a user's own widget is left alone": ([widget_output("abc", metadata={})], ["abc"]),
    "another extension's metadata is left alone": ([widget_output("abc", metadata={"nbagent": "live"})], ["abc"]),
    "an already unlinked view stays unlinked": ([widget_output("")], [""]),
    "a static output only": ([STATIC], [None]),
    "two live views in one cell": ([widget_output("a"), widget_output("b")], ["", ""]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_saving_unlinks_only_live_nbagent_views(name: str) -> None:
    outputs, expected = CASES[name]
    notebook = {"cells": [{"cell_type": "code", "outputs": copy.deepcopy(outputs)}, {"cell_type": "markdown"}]}
    unlink_live_views(notebook)
    after = [(o.get("data") or {}).get(WIDGET_VIEW, {}).get("model_id") for o in notebook["cells"][0]["outputs"]]
    assert after == expected
    assert [o.get("data", {}).get("text/html") for o in notebook["cells"][0]["outputs"]] == [
        o.get("data", {}).get("text/html") for o in outputs
    ]  # the static copy is saved as it was


def test_the_hook_touches_notebooks_only() -> None:
    text = {"type": "file", "content": json.dumps({"cells": [{"outputs": [widget_output("abc")]}]})}
    before = copy.deepcopy(text)
    pre_save(text, path="x.txt", contents_manager=None)
    assert text == before


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_a_real_jupyter_server_has_the_extension_on_and_saves_live_views_unlinked(tmp_path: Path) -> None:
    pytest.importorskip("jupyter_server", reason="jupyter_server is not installed (pip install 'nbagent[server]')")
    listed = subprocess.run([sys.executable, "-m", "jupyter", "server", "extension", "list"], capture_output=True, text=True, timeout=60)
    lines = [line for line in (listed.stdout + listed.stderr).splitlines() if "nbagent.server" in line]
    assert any("enabled" in line for line in lines) and any("OK" in line for line in lines), listed.stderr

    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_TOKEN": token}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         f"--ServerApp.root_dir={tmp_path}", f"--IdentityProvider.token={token}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr.read().decode()[-2000:] if server.stderr else ""
                time.sleep(0.2)
        notebook = {
            "cells": [{"cell_type": "code", "source": "%agent_replay", "metadata": {}, "execution_count": 1,
                       "outputs": [STATIC, widget_output("live-model")]}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
        }  # fmt: skip
        body = json.dumps({"type": "notebook", "format": "json", "content": notebook}).encode()
        request = urllib.request.Request(f"{base}/api/contents/saved.ipynb?token={token}", data=body, method="PUT")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status in (200, 201)
    finally:
        server.terminate()
        server.wait(timeout=30)
    saved = json.loads((tmp_path / "saved.ipynb").read_text())
    outputs = saved["cells"][0]["outputs"]
    html = outputs[0]["data"]["text/html"]
    assert outputs[1]["data"][WIDGET_VIEW]["model_id"] == ""  # the live reference is gone from the file
    assert ("".join(html) if isinstance(html, list) else html) == STATIC["data"]["text/html"]  # the static copy is kept
