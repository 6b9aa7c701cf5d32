"""links.py's rules: which Jupyter server started this kernel, and the whole link to its session page (issue 22)."""

from __future__ import annotations

import json
from pathlib import Path

from nbagent.render.page_links import ServerInfo, find_server, kernel_server, notebook_for, server_from_file, where_to_open


def test_the_server_is_found_by_the_kernels_parent_and_the_link_is_whole(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    info = {"url": "http://localhost:8888/", "root_dir": "/home/ana", "pid": 41, "sock": "", "token": "secret"}
    (runtime / "jpserver-41.json").write_text(json.dumps(info))
    (runtime / "jpserver-42.json").write_text(json.dumps({**info, "url": "", "sock": "/tmp/s.sock"}))
    (runtime / "jpserver-43.json").write_text("not json")
    assert find_server([runtime], [7, 41]) == ServerInfo("http://localhost:8888/", "/home/ana")
    assert find_server([runtime], [42, 43, 44]) is None  # a Unix socket, a broken file, no file: not known
    assert server_from_file(runtime / "missing.json") is None
    assert notebook_for("/home/ana/proj/a.ipynb", ServerInfo("http://h/", "/home/ana")) == "proj/a.ipynb"
    assert notebook_for("/srv/b.ipynb", ServerInfo("http://h/", "/home/ana")) == "/srv/b.ipynb"
    server = ServerInfo("http://localhost:8888/base/", "/home/ana")
    assert where_to_open("/home/ana/a b.ipynb", "s1", server=server) == (
        "Live view in the browser: http://localhost:8888/base/nbagent/sessions?notebook=a%20b.ipynb&session=s1"
    )
    assert where_to_open("", "", server=server) == "Sessions in the browser: http://localhost:8888/base/nbagent/sessions"
    unknown = where_to_open("/home/ana/a.ipynb", "s1", server=None, environ={})
    assert "<server>" not in unknown and "does not know its address" in unknown
    assert "/nbagent/sessions?notebook=%2Fhome%2Fana%2Fa.ipynb&session=s1" in unknown
    hub = {"JUPYTERHUB_SERVICE_PREFIX": "/user/ana/", "JUPYTERHUB_PUBLIC_URL": "https://hub.example.org/user/ana/"}
    assert kernel_server(hub) == ServerInfo("https://hub.example.org/user/ana/")
    assert kernel_server({"JUPYTERHUB_SERVICE_PREFIX": "/user/ana/"}) is None  # the single-user server's own address is internal
