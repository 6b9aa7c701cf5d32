"""Issue 20, defect 6 (reliability/redteam/server.py): a long log read by a real Jupyter server, in bounded memory.

The campaign's attacks run here as in ``python -m reliability``: ``events?limit=1`` reads about one
chunk (bytes counted in the server process), a stream client that never reads is disconnected while
two others read the whole catch-up, and the server's peak memory stays far below the log rendered whole.
In-process tests of the chunks, pages and shared catch-up are in tests/server/test_server_replay.py.
"""

from __future__ import annotations

import pytest

from reliability import redteam
from reliability.redteam import server

pytestmark = [pytest.mark.slow]
pytest.importorskip("jupyter_server", reason="jupyter_server is not installed (pip install 'nbagent[server]')")


def test_a_long_log_is_served_in_bounded_memory_and_a_client_that_never_reads_is_dropped() -> None:
    with redteam.context(quick=True) as ctx:
        findings = server.attacks(ctx)
    assert len(findings) == 3 and {f.defect for f in findings} == {6}
    failed = [f"{f.attack}: {f.outcome} {f.problems}" for f in findings if not f.held]
    assert not failed, "\n".join(failed)
