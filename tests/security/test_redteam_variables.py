"""Issue 33, items 3, 6 and 11: what the agent reads of the kernel's variables, attacked through a real kernel.

Each test runs a real ipykernel (jupyter_client) with ``%load_ext nbagent`` against the fake Messages API, and the
fake model calls ``inspect_variable`` as a model would (several calls side by side):

* item 3: secrets under secret-named dict keys, object attributes and DataFrame columns reach neither the requests
  nor the log (the values are loaded from files, so no cell's source holds them);
* item 6: a 2 GB ``np.memmap`` over a sparse file is not read (no statistics, no values; the kernel's peak memory stays
  far below the file), and a large in-memory array's statistics are over a stated, bounded sample;
* item 11: user code in a DataFrame subclass's property and a list or ``Counter`` subclass's ``__len__``/``__iter__``
  is not run by the summaries (the notebook-context note at the start and the mark at the end of a turn, a ``{field}``
  in the request) nor by ``inspect_variable``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nbagent.notebook import notebook_tools as nt
from nbagent.stores import folders as store
from tests.support.fake_anthropic import FakeAnthropic, text, tool_uses

pytestmark = [pytest.mark.kernel, pytest.mark.slow]  # real ipykernels

GB = 2  # the memmap's size: a sparse file, so it costs no disk
PEAK_GROWTH_KB = 512 * 1024  # the kernel's peak memory may grow this much over the turn (reading the file: 2 GB or more)


def results(fake: FakeAnthropic) -> dict[str, str]:
    """The text of each inspect_variable result the model got, by the variable's name."""
    messages = fake.requests[-1].body["messages"]
    names = {
        block["id"]: block["input"]["name"]
        for message in messages
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "tool_use" and block["name"] == nt.INSPECT
    }
    found: dict[str, str] = {}
    for message in messages:
        if message["role"] == "user" and isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result" and block["tool_use_id"] in names:
                    content = block["content"]
                    body = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
                    found[names[block["tool_use_id"]]] = body
    return found


def log_bytes(tmp_path: Path) -> bytes:
    [stored] = store.list_sessions(tmp_path / ".nbagent" / "work.ipynb")
    return stored.path.read_bytes()


def inspect_all(*names: str) -> Any:
    """One model reply calling inspect_variable on each name, side by side."""
    return tool_uses([(nt.INSPECT, {"name": name}) for name in names])


SECRETS = {
    "cfg": "Tr0ub4dor-cfg-password",
    "conn": "Tr0ub4dor-conn-password",
    "pw1": "Tr0ub4dor-column-one",
    "pw2": "Tr0ub4dor-column-two",
    "tok1": "opaque-token-value-one",
    "tok2": "opaque-token-value-two",
}
LOAD_SECRETS = """
import json, pandas as pd
cfg = json.load(open("cfg.json"))
class Conn:
    def __init__(self, host, password):
        self.host = host
        self.password = password
conn = Conn("db.internal", open("conn.txt").read())
users = pd.read_csv("users.csv")
pw_column = users["password"]
"""


def test_secrets_inside_values_reach_neither_the_request_nor_the_log(kernels, fake: FakeAnthropic, tmp_path: Path) -> None:
    (tmp_path / "cfg.json").write_text(json.dumps({"host": "db.internal", "db_password": SECRETS["cfg"]}))
    (tmp_path / "conn.txt").write_text(SECRETS["conn"])
    (tmp_path / "users.csv").write_text(
        f"name,password,api_token,age\nann,{SECRETS['pw1']},{SECRETS['tok1']},41\nbob,{SECRETS['pw2']},{SECRETS['tok2']},37\n"
    )
    kernel = kernels()
    kernel.run("%load_ext nbagent", "setup")
    kernel.run(LOAD_SECRETS, "load")
    fake.script(inspect_all("cfg", "conn", "users", "pw_column"), text("Looked."))
    kernel.run("%agent what do these hold?", "ask")

    seen = results(fake)
    assert set(seen) == {"cfg", "conn", "users", "pw_column"}
    assert "'host': str 'db.internal'" in seen["cfg"] and "'db_password': (value hidden)" in seen["cfg"]
    assert "host: str 'db.internal'" in seen["conn"] and "password: (value hidden)" in seen["conn"]
    assert "ann" in seen["users"] and "41" in seen["users"] and "(value hidden)" in seen["users"]
    assert "values of 'password', 'api_token' hidden" in seen["users"]
    assert "values of 'password' hidden" in seen["pw_column"]
    log = log_bytes(tmp_path)
    for secret in SECRETS.values():
        assert all(secret.encode() not in request.raw for request in fake.requests), secret
        assert secret.encode() not in log, secret


def test_a_large_memmap_is_not_read_and_a_large_array_is_sampled(kernels, fake: FakeAnthropic, tmp_path: Path) -> None:
    with open(tmp_path / "big.f64", "wb") as handle:
        handle.truncate(GB * 10**9)  # sparse: reading it costs memory and page faults, not disk
    kernel = kernels()
    kernel.run("%load_ext nbagent", "setup")
    kernel.run(
        "import numpy as np, resource\n"
        f"big = np.memmap('big.f64', dtype='float64', mode='r', shape=({GB * 10**9 // 8},))\n"
        "view = np.asarray(big)[::3]\n"
        "arr = np.arange(5_000_000, dtype='float64')",
        "data",
    )
    fake.script(text("Warm."))  # the first turn loads the SDK: not counted in the peak below
    kernel.run("%agent hello", "warm")
    kernel.run("peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss", "peak")
    fake.script(inspect_all("big", "view", "arr"), text("Looked."))
    kernel.run("%agent what are big and arr?", "ask")
    grown = int(kernel.run("print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak)", "grown").strip())

    seen = results(fake)
    for name in ("big", "view"):
        assert "memory-mapped file: no values read and no statistics computed" in seen[name], seen[name]
        assert "min " not in seen[name] and "first 20 values" not in seen[name]
    assert "numpy.memmap, shape (250,000,000,), dtype float64" in seen["big"]
    assert "over a sample of 100,000 evenly spaced values of 5,000,000" in seen["arr"], seen["arr"]
    assert "min 0  max 5e+06" in seen["arr"] and "first 20 values (flattened): 0.0, 1.0" in seen["arr"]
    assert grown < PEAK_GROWTH_KB, f"the kernel's peak memory grew {grown / 1024:,.0f} MB"


USER_CODE = """
import collections, pathlib
import pandas as pd
effects = []
def effect(what):
    effects.append(what)
    pathlib.Path("effects.txt").open("a").write(what + "\\n")
class Tracked(pd.DataFrame):
    @property
    def shape(self):
        effect("DataFrame subclass property")
        return super().shape
class Rows(list):
    def __len__(self):
        effect("list subclass __len__")
        return super().__len__()
    def __iter__(self):
        effect("list subclass __iter__")
        return super().__iter__()
class Tally(collections.Counter):
    def __len__(self):
        effect("Counter subclass __len__")
        return super().__len__()
    def __iter__(self):
        effect("Counter subclass __iter__")
        return super().__iter__()
class Look(dict):
    __module__ = "collections"
    __qualname__ = "OrderedDict"
    def __len__(self):
        effect("look-alike __len__")
        return 1
frame = Tracked({"a": [1, 2]})
rows = Rows([1, 2, 3])
tally = Tally("aab")
look = Look(a=1)
"""


def test_summaries_run_no_user_code(kernels, fake: FakeAnthropic, tmp_path: Path) -> None:
    kernel = kernels()
    kernel.run("%load_ext nbagent", "setup")
    kernel.run(USER_CODE, "define")
    kernel.run("effects.clear()\nimport os\nos.remove('effects.txt') if os.path.exists('effects.txt') else None", "reset")
    fake.script(inspect_all("frame", "rows", "tally", "look"), text("Looked."))
    kernel.run("%agent what are {frame} and {tally}?", "ask")
    fake.script(text("Again."))
    kernel.run("rows.append(4)", "edit")
    kernel.run("%agent and now?", "ask2")

    assert kernel.run("print(effects)", "effects").strip() == "[]"
    assert not (tmp_path / "effects.txt").exists()
    note = json.dumps(fake.requests[0].body["messages"][-1]["content"])
    assert "Tracked (a pandas.DataFrame subclass: not read)" in note and "Tally (a collections.Counter subclass: not read)" in note
    seen = results(fake)
    assert seen["rows"].startswith("rows: Rows (a list subclass: not read)")
    assert "(a dict subclass: not read)" in seen["look"]  # its borrowed __module__ names it, but it is not read
