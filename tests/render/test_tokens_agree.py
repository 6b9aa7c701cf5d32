"""One truth about tokens: every view of one session shows the same figures, in the same words, as usage.Tokens defines them.

One session of two turns and four requests is recorded through the real loop and SDK against the fake API
(which reports prompt caching as the platform docs define ``usage``: cache writes on the first request, cache
reads after), then read back by the panel (live and re-rendered), the static transcript, ``%agent_sessions``,
``nbagent sessions`` (table and ``--json``), the replay, both exports, and the server's listing and live stream.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import nbformat
import pytest

import nbagent
from nbagent.cli import export
from nbagent.cli.main import main
from nbagent.notebook.kernel import TurnIndex
from nbagent.notebook.output import StaticPanel
from nbagent.notebook.panel import Panel
from nbagent.notebook.place import Place, print_sessions
from nbagent.notebook.replay import Replay
from nbagent.record.log_reader import read_events
from nbagent.render.parts import Start, context_figure, tokens_line, tokens_words, usage_text
from nbagent.render.timeline import Timeline
from nbagent.server.present import Presenter
from nbagent.state import fold
from nbagent.state.tokens import Tokens
from nbagent.stores import FILES
from nbagent.stores import folders as store
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

NOTEBOOK = "analysis.ipynb"


@nbagent.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@dataclass
class Recorded:
    """The session and what its two live panels showed."""

    folder: Path  # the notebook's folder
    log: Path
    events: list[dict[str, Any]]
    panels: list[Panel]


def _turn(session: nbagent.Session, prompt: str, client: anthropic.Anthropic) -> Panel:
    """One turn as ``%agent`` runs it: a panel that begins where the session stands, then the loop."""
    panel = Panel(prompt)
    panel.begin(Start.of_state(session.state))
    unsubscribe = session.subscribe(panel, since=session.seq)
    try:
        nbagent.run(session, prompt, tools=[add], client=client, model="claude-test", approval="auto")
    finally:
        unsubscribe()
    panel.finish()
    return panel


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    folder = tmp_path_factory.mktemp("tokens")
    (folder / NOTEBOOK).write_text("{}")
    log = store.log_dir_for(folder / NOTEBOOK) / "s1.jsonl"
    log.parent.mkdir(parents=True)
    with FakeAnthropic() as fake:
        fake.script(
            tool_use("add", {"a": 2, "b": 3}, text="Let me add."),
            tool_use("add", {"a": 5, "b": 4}),
            text("The sum is **9**."),
            text("Still **9**."),
        )
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
        with nbagent.Session.open(log) as session:
            panels = [_turn(session, "what is 2+3+4?", client), _turn(session, "and again?", client)]
        assert len(fake.requests) == 4
    yield Recorded(folder, log, list(read_events(log)), panels)


@pytest.fixture(scope="module")
def truth(recorded: Recorded) -> Tokens:
    """The fold's figures for the session, checked to have cache reads and writes (else the test proves little)."""
    tokens = Tokens.of_state(fold.fold(recorded.events))
    assert tokens.from_cache > 0 and tokens.to_cache > 0 and tokens.input >= tokens.from_cache + tokens.to_cache
    assert tokens.output > 0 and 0 < tokens.context < tokens.window
    replies = [e["usage"] for e in recorded.events if e["type"] == "assistant_msg"]
    assert len(replies) == 4 and tokens.input == sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in replies
    )
    return tokens


def _shown(markup: str) -> str:
    """HTML as the words a reader sees (entities decoded)."""
    return html.unescape(markup)


def test_the_panels_and_static_transcripts_show_the_requests_and_the_sessions_figures_each_labelled(
    recorded: Recorded, truth: Tokens
) -> None:
    """Issue 35 item 4: a panel's tokens and dollars are of one scope each, said: this request's, then the session's."""
    second = next(e["seq"] for e in recorded.events if e["type"] == "user_msg" and e["content"] == "and again?")
    replies = [e["usage"] for e in recorded.events if e["type"] == "assistant_msg" and e["seq"] > second]
    assert truth.turn is not None and truth.turn.input == sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in replies
    )
    assert 0 < truth.turn.input < truth.input and 0 < truth.turn.output < truth.output
    mine, whole = tokens_words(truth.turn), tokens_words(truth)
    line = tokens_line(truth)
    assert line == f"this request: {mine} · cost unknown; session: {whole} · cost unknown; context {context_figure(truth)}"
    first = recorded.panels[0]  # the session's first request: its figures are the session's, said once
    assert "session:" not in _shown(first.header.value) and "done · this request: " in _shown(first.header.value)
    last = recorded.panels[-1]  # the second turn's panel: its own request's figures, and the session's, each labelled
    assert f"done · {line}" in _shown(last.header.value)
    bundle = last.bundle()
    assert f"done · {line}" in _shown(bundle["text/html"]) and f"done · {line}" in bundle["text/plain"]
    index = TurnIndex()
    with nbagent.Session.open(recorded.log) as session:
        again_turn = index.update(session)[-1]
    again = StaticPanel("and again?")  # the turn re-rendered (a restart, Run All): its events only, from where it began
    again.begin(index.start(again_turn.seq))
    for event in recorded.events:
        if event["seq"] >= again_turn.seq:
            again(event)
    assert f"done · {line}" in _shown(again.static_bundle()["text/html"])


def test_the_session_tables_and_json_say_the_same(recorded: Recorded, truth: Tokens, monkeypatch: pytest.MonkeyPatch) -> None:
    words, context = tokens_words(truth), context_figure(truth)
    out, err = io.StringIO(), io.StringIO()
    assert main(["sessions", str(recorded.folder), "--json"], out=out, err=err) == 0, err.getvalue()
    (entry,) = json.loads(out.getvalue())
    assert (entry["tokens_in"], entry["tokens_out"]) == (truth.input, truth.output)
    assert (entry["tokens_from_cache"], entry["tokens_to_cache"]) == (truth.from_cache, truth.to_cache)
    assert entry["tokens"] == truth.total == sum(entry["usage"].values())  # the old key keeps its meaning
    assert (entry["tokens_text"], entry["context"], entry["context_tokens"], entry["window"]) == (
        words,
        context,
        truth.context,
        truth.window,
    )
    out = io.StringIO()
    assert main(["sessions", str(recorded.folder)], out=out, err=err) == 0, err.getvalue()
    header, row = out.getvalue().splitlines()
    assert f"  {words}  " in row and f"  {context}  " in row and header.index("TOKENS") == row.index(words)
    out = io.StringIO()  # %agent_sessions prints this
    print_sessions(Place(FILES, recorded.log.parent), recorded.log, str(recorded.folder / NOTEBOOK), out=out)
    assert f"  {words}  " in out.getvalue() and f"  {context}  " in out.getvalue()


def test_the_replay_and_the_exports_say_the_same(recorded: Recorded, truth: Tokens, tmp_path: Path) -> None:
    line = tokens_line(truth)
    assert Timeline(recorded.events).statuses[-1] == f"done · {line}"
    assert f"done · {line}" in _shown(Replay(recorded.events, source=str(recorded.log)).static_bundle()["text/html"])
    whole = tokens_line(truth.whole())  # an export is of the whole session: its figures alone, unlabelled
    assert whole == f"{tokens_words(truth)} · cost unknown · context {context_figure(truth)}"
    written = export.export(recorded.events, tmp_path / "s.ipynb", source=recorded.log)
    header = nbformat.read(written, as_version=4).cells[0].source
    assert f"2 turn(s): {whole}." in header
    markdown = export.export(recorded.events, tmp_path / "s.md", source=recorded.log).read_text()
    assert f"2 turn(s): {whole}." in markdown
    out, err = io.StringIO(), io.StringIO()
    assert main(["show", str(recorded.log)], out=out, err=err) == 0, err.getvalue()
    assert f"\nin all: {whole}\n" in out.getvalue()  # nbagent show ends with the whole session's figures


def test_the_servers_live_records_say_the_same(recorded: Recorded, truth: Tokens) -> None:
    presenter = Presenter()  # what the server's stream sends the page, event by event
    records = [presenter.record(event) for event in recorded.events]
    assert records[-1]["status"] == f"done · {tokens_line(truth)}"


@pytest.mark.slow
def test_the_server_page_lists_and_streams_the_same(recorded: Recorded, truth: Tokens, tmp_path: Path) -> None:
    pytest.importorskip("jupyter_server", reason="jupyter_server is not installed (pip install 'nbagent[server]')")
    from tests.support.server_harness import NbServer

    (tmp_path / "data").mkdir()
    server = NbServer(recorded.folder, tmp_path / "home", env={"NBAGENT_DATA_DIR": str(tmp_path / "data")}).start()
    try:
        listing = server.get("/nbagent/api/sessions?path=")
        assert listing.status == 200, listing.body
        (row,) = listing.body["sessions"]
        assert (row["tokens_text"], row["context"]) == (tokens_words(truth), context_figure(truth))
        assert (row["tokens_in"], row["tokens_out"], row["tokens_from_cache"]) == (truth.input, truth.output, truth.from_cache)
        stream = server.stream(NOTEBOOK, "s1")
        try:
            records = stream.records(until=recorded.events[-1]["seq"])
        finally:
            stream.close()
        assert records[-1]["status"] == f"done · {tokens_line(truth)}"
    finally:
        server.stop()


# The words, as a table: input counts the cached input, so a reply read from the cache is never "0 in" --------
WORDS = [
    # (usage, words)
    ({"input_tokens": 0, "cache_read_input_tokens": 12_466, "output_tokens": 426}, "12,466 tokens in (12,466 from cache) · 426 out"),
    (
        {"input_tokens": 3, "cache_creation_input_tokens": 900, "cache_read_input_tokens": 11_563, "output_tokens": 426},
        "12,466 tokens in (11,563 from cache) · 426 out",
    ),
    ({"input_tokens": 0, "cache_creation_input_tokens": 2_048, "output_tokens": 1}, "2,048 tokens in · 1 out"),
    ({"input_tokens": 950, "output_tokens": 12}, "950 tokens in · 12 out"),
    (
        {"input_tokens": 10, "output_tokens": 5, "iterations": [{"type": "compaction", "input_tokens": 1_000, "output_tokens": 50}]},
        "1,010 tokens in · 55 out",
    ),
    ({}, "0 tokens"),
]


@pytest.mark.parametrize(("usage", "words"), WORDS)
def test_a_replys_tokens_in_words(usage: dict[str, Any], words: str) -> None:
    assert usage_text(usage) == words
    if any(usage.get(k) for k in ("cache_read_input_tokens", "cache_creation_input_tokens")):
        assert not usage_text(usage).startswith("0 ")


LINES = [
    # (figures, status line words)
    (
        Tokens.of({"cache_read_input_tokens": 12_466, "output_tokens": 426}, context=12_892),
        "12,466 tokens in (12,466 from cache) · 426 out · context 12.9k / 200k",
    ),
    (
        Tokens.of({"input_tokens": 143_000, "output_tokens": 400}, context=143_400, window=1_000_000),
        "143,000 tokens in · 400 out · context 143k / 1M",
    ),
    (Tokens.of({"input_tokens": 900, "output_tokens": 60}, compacted=True), "900 tokens in · 60 out · context compacted"),
    (Tokens.of({}), ""),
]


@pytest.mark.parametrize(("tokens", "line"), LINES)
def test_a_sessions_figures_in_words(tokens: Tokens, line: str) -> None:
    assert tokens_line(tokens) == line
