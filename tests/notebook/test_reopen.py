"""Issue 32, items 1, 3, 4: the pure rules of a reopened page (nbagent/notebook/reopen.py) and the comm's new shapes, as tables."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent.notebook import reopen
from nbagent.notebook.cells_protocol import problem
from nbagent.notebook.reopen import CellRun, Offer, PageCell

RUN = CellRun("c1", "s1", "summarize data.csv", 3, 9, "done", "client-a")
RUNS = {"c1": RUN}
MARK = ("s1", 3, 9)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("%agent summarize data.csv", ["summarize data.csv"]),
        ("%agent --new  summarize   data.csv  ", ["summarize   data.csv"]),
        ("%agent --model claude-x -- summarize data.csv", ["summarize data.csv"]),
        ("%%agent --new\nsummarize\ndata.csv\n", ["summarize\ndata.csv"]),
        ("%%agent summarize\ndata.csv", ["summarize\ndata.csv"]),
        ("x = 1\n%agent one\n  %agent two", ["one", "two"]),
        ("print('%agent no')", []),
        ("%agent_sessions", []),
        ("", []),
        ("%agent", [""]),
    ],
)
def test_the_requests_a_source_asks_are_parsed_as_the_magic_does(source: str, expected: list[str]) -> None:
    assert reopen.requests(source) == expected


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ([PageCell("c1", "%agent summarize data.csv")], [RUN]),  # finished, not shown: written
        ([PageCell("c1", "%agent   summarize\n")], []),  # another request
        ([PageCell("c1", "%agent summarize  data.csv\n")], [RUN]),  # up to whitespace, as a restart matches
        ([PageCell("c1", "%agent summarize data.csv", frozenset({MARK}))], []),  # the cell shows it already
        ([PageCell("c1", "%agent summarize data.csv", frozenset({("s1", 3, 8)}))], [RUN]),  # an older output of it
        ([PageCell("c2", "%agent summarize data.csv")], []),  # another cell (a copy): never
        ([PageCell("c1", "%agent --new summarize data.csv")], [RUN]),
        ([PageCell("c1", "%%agent\nsummarize data.csv")], [RUN]),
        ([], []),
    ],
)
def test_a_finished_run_is_written_only_into_its_own_unchanged_cell_that_lacks_it(cells: list[PageCell], expected: list[CellRun]) -> None:
    assert reopen.plan(RUNS, cells) == expected


@pytest.mark.parametrize(
    ("asker", "ran_it", "shared", "offer", "open_pages", "now", "runner_open", "expected"),
    [
        ("b", False, False, None, {"a", "b"}, 100.0, False, True),  # the first to ask
        ("b", False, False, Offer("a", 90.0), {"a", "b"}, 100.0, False, False),  # another page was offered it: read-only
        ("b", False, False, Offer("a", 70.0), {"a", "b"}, 100.0, False, True),  # ... 30 s ago without an answer: offered again
        ("b", False, False, Offer("a", 99.0), {"b"}, 100.0, False, True),  # ... and closed since
        ("b", False, False, Offer("a", 70.0, answered=True), {"a", "b"}, 100.0, False, False),  # it wrote them: read-only here
        ("b", False, False, Offer("a", 70.0, answered=True), {"b"}, 100.0, False, True),  # ... and closed: its model is gone
        ("a", False, False, Offer("a", 99.0), {"a", "b"}, 100.0, False, True),  # the same page asks again
        ("b", True, False, Offer("a", 99.0), {"a", "b"}, 100.0, False, True),  # the page that ran the cell writes its own model
        ("b", False, False, None, {"a", "b"}, 100.0, True, False),  # ... and while it is open, no other page writes
        ("b", False, True, None, {"a", "b"}, 100.0, True, True),  # ... unless they share one document: one writer
        ("b", True, True, Offer("a", 99.0), {"a", "b"}, 100.0, False, False),  # but not a document shared with the writer (RTC)
        ("b", False, True, Offer("a", 99.0), {"a", "b"}, 100.0, False, False),  # collaborative pages of a path: one writer
        ("b", False, True, None, {"a", "b"}, 100.0, False, True),
    ],
)
def test_one_writer_a_document(
    asker: str, ran_it: bool, shared: bool, offer: Offer | None, open_pages: set[str], now: float, runner_open: bool, expected: bool
) -> None:
    opened = frozenset(open_pages)
    assert reopen.writes(asker, ran_it=ran_it, shared=shared, offer=offer, open_pages=opened, now=now, runner_open=runner_open) is expected


@pytest.mark.parametrize(
    ("page", "path", "expected"),
    [
        ("k1", "work.ipynb", "path:work.ipynb"),  # every page of a path (collaborative or not) shares one writer
        ("k2", "work.ipynb", "path:work.ipynb"),
        ("k1", "", "page:k1"),  # a page that did not say its path is its own document
    ],
)
def test_the_writer_is_chosen_per_notebook_path(page: str, path: str, expected: str) -> None:
    assert reopen.document(page, path) == expected


@pytest.mark.parametrize(
    ("run", "client", "acknowledged", "expected"),
    [
        (RUN, "client-b", set(), True),  # run from a page since gone, asked from another: possibly unseen
        (RUN, "client-a", set(), False),  # the page that ran it asks
        (RUN, "client-b", {MARK}, False),  # a page with the extension showed or wrote it
        (CellRun("c1", "s1", "r", 3, 9, "done", ""), "client-b", set(), False),  # who ran it is not known: nothing said
        (RUN, "", set(), False),
    ],
)
def test_a_turn_counts_as_unseen_when_another_client_ran_it_and_no_page_acknowledged_it(
    run: CellRun, client: str, acknowledged: set[reopen.Marker], expected: bool
) -> None:
    assert reopen.unseen(run, client, acknowledged) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (reopen.metadata(MARK), MARK),
        ({}, None),
        (None, None),
        ({"nbagent": {"final": {"session": "s1", "from": "3", "to": 9}}}, None),
        ({"nbagent": {"final": {"session": "s1", "from": True, "to": 9}}}, None),
        ({"nbagent": {"session": "s1"}}, None),
    ],
)
def test_the_marker_is_read_back_from_an_outputs_metadata(value: Any, expected: Any) -> None:
    assert reopen.marker_of(value) == expected


def test_run_of_a_views_events() -> None:
    events = [{"seq": 4}, {"seq": 5}, {"seq": 11}]
    assert reopen.run_of(events, cell_id="c", session="s", request="r", status="done", client="x") == CellRun(
        "c", "s", "r", 4, 11, "done", "x"
    )
    assert reopen.run_of([], cell_id="c", session="s", request="r", status="done", client="x") is None
    assert reopen.run_of(events, cell_id="", session="s", request="r", status="done", client="x") is None


CATCH_UP = {
    "v": 1,
    "type": "catch_up",
    "id": "q1",
    "cells": [{"id": "c1", "source": "%agent hi", "markers": [{"session": "s", "from": 1, "to": 4}]}],
}


@pytest.mark.parametrize(
    ("message", "wrong"),
    [
        (CATCH_UP, ""),
        ({**CATCH_UP, "cells": []}, ""),
        ({**CATCH_UP, "cells": [{"id": "c1", "source": "x", "markers": [{"session": "s", "from": -1, "to": 4}]}]}, "catch_up: must be"),
        ({**CATCH_UP, "cells": [{"id": "c1", "source": "x", "markers": [], "outputs": []}]}, "without the keys ['outputs']"),
        ({**CATCH_UP, "cells": [{"id": "c1", "source": "x", "markers": [{"session": "s", "from": 1, "to": 2}] * 101}]}, "at most 100"),
        ({"v": 1, "type": "transcripts_written", "id": "q1", "written": ["c1"], "skipped": []}, ""),
        ({"v": 1, "type": "transcripts_written", "id": "q1", "written": [1], "skipped": []}, "transcripts_written: must be"),
        ({"v": 1, "type": "hello", "extension": "0.1.0", "path": "a/work.ipynb", "collaborative": True}, ""),
        ({"v": 1, "type": "hello", "extension": "0.1.0", "collaborative": "yes"}, "'collaborative' is true or false"),
        (
            {"v": 1, "type": "transcripts", "id": "q1", "write": True, "cells": []},
            "unknown message type",
        ),  # the kernel's, not the browser's
    ],
)
def test_the_new_browser_messages_are_checked(message: dict[str, Any], wrong: str) -> None:
    found = problem(message)
    assert (wrong in found) if wrong else found == "", found


@pytest.mark.parametrize(
    ("asker", "open_clients", "shown", "unknown", "shows"),
    [
        ("client-b", {"client-a", "client-b"}, {}, True, False),  # its page has the comm open but said nothing yet: wait
        ("client-b", {"client-a", "client-b"}, {"client-a": {RUN.marker}}, False, True),  # it shows the run: it writes
        ("client-b", {"client-b"}, {}, False, False),  # its page closed its comm: nobody to wait for
        ("client-a", {"client-a"}, {}, False, False),  # the page that ran it asks itself
        ("client-b", {"client-a", "client-b"}, {"client-a": {("s1", 1, 2)}}, True, False),  # it shows another run only
    ],
)
def test_a_runs_own_page_is_waited_for_and_then_writes(
    asker: str, open_clients: set[str], shown: dict[str, set[Any]], unknown: bool, shows: bool
) -> None:
    assert reopen.runner_unknown([RUN], asker, open_clients, shown) is unknown
    assert reopen.runner_shows([RUN], asker, open_clients, shown) is shows
