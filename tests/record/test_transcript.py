"""The lazy transcript: what decodes its prefix and what does not, list behaviour, and the fallback to the log."""

from __future__ import annotations

import copy
import json
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import LogCorruptError, LogError, Session, history, read_events
from nbagent.record import events as ev
from nbagent.record import line_codec
from nbagent.record.transcript import Prefix, Transcript
from nbagent.state.fold import fold
from nbagent.stores import snapshot
from tests.agent.test_session import add_turns
from tests.support import snapshots


def message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}


class Loader:
    """The encoded prefix, counting how often it is read."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.data = json.dumps(messages).encode()
        self.calls = 0

    def __call__(self) -> bytes:
        self.calls += 1
        return self.data


def lazy(count: int = 5, tail: int = 2) -> tuple[Transcript, list[dict[str, Any]], Loader]:
    """A transcript of ``count + tail`` messages whose first ``count`` are encoded, the same as a list, and its loader."""
    messages = [message(i) for i in range(count + tail)]
    loader = Loader(messages[:count])
    return Transcript(messages[count:], Prefix(count, loader)), messages, loader


# What does not decode ----------------------------------------------------------------------------------
def test_length_the_last_message_appending_and_replacing_the_last_do_not_decode() -> None:
    transcript, messages, loader = lazy()
    assert len(transcript) == 7 and transcript
    assert transcript[-1] == messages[-1] and transcript[5] == messages[5] and transcript[-2] == messages[-2]
    assert transcript[5:] == messages[5:] and transcript[6:2] == []
    assert next(reversed(transcript)) == messages[-1]
    transcript.append(message(7))
    transcript[-1] = {"role": "user", "content": "merged"}
    transcript.insert(len(transcript), message(8))
    del transcript[-1]
    assert transcript != [message(0)]  # a length mismatch needs no decoding either
    assert loader.calls == 0 and transcript.encoded == 5
    with pytest.raises(IndexError):
        transcript[8]
    assert loader.calls == 0
    assert transcript == messages + [{"role": "user", "content": "merged"}]
    assert loader.calls == 1 and transcript.encoded == 0


READS_THE_PREFIX: dict[str, Callable[[Transcript], Any]] = {
    "iterate": list,
    "index-in-prefix": lambda t: t[0],
    "negative-index-in-prefix": lambda t: t[-7],
    "slice": lambda t: t[:3],
    "contains": lambda t: message(0) in t,
    "repr": repr,
    "copy": lambda t: t.copy(),
    "deepcopy": copy.deepcopy,
    "index": lambda t: t.index(message(1)),
    "insert-in-prefix": lambda t: t.insert(0, message(99)),
    "delete-in-prefix": lambda t: t.__delitem__(1),
    "set-in-prefix": lambda t: t.__setitem__(2, message(99)),
    "set-slice": lambda t: t.__setitem__(slice(5, 6), [message(99)]),
}


@pytest.mark.parametrize("name", list(READS_THE_PREFIX))
def test_reading_the_prefix_decodes_it_once_and_then_it_is_a_list(name: str) -> None:
    transcript, messages, loader = lazy()
    reference = copy.deepcopy(messages)
    result = READS_THE_PREFIX[name](transcript)
    expected = READS_THE_PREFIX[name](reference)
    assert result == expected
    assert loader.calls == 1 and transcript.encoded == 0
    assert transcript == reference and list(transcript) == reference and repr(transcript) == repr(reference)
    assert loader.calls == 1


def test_equality_with_lists_both_ways() -> None:
    transcript, messages, loader = lazy()
    assert transcript != [message(0)] and [message(0)] != transcript and transcript != "not a list"
    assert loader.calls == 0  # different lengths
    assert transcript == messages and messages == transcript
    assert transcript != messages[:-1] + [message(99)] and messages[:-1] + [message(99)] != transcript
    other, _, _ = lazy()
    assert transcript == other and other == transcript and transcript == Transcript(messages)
    assert Transcript() == [] and Transcript() != [message(0)]


def test_copies_are_plain_lists() -> None:
    transcript, messages, _ = lazy()
    for copied in (
        transcript.copy(),
        list(transcript),
        copy.copy(transcript),
        copy.deepcopy(transcript),
        pickle.loads(pickle.dumps(transcript)),
    ):
        assert type(copied) is list and copied == messages
    deep = copy.deepcopy(transcript)
    deep[0]["content"] = "changed"
    assert transcript[0]["content"] == "m0"
    assert repr(transcript) == repr(messages) and json.dumps(transcript.copy()) == json.dumps(messages)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 4),
    st.integers(0, 3),
    st.lists(
        st.tuples(
            st.sampled_from(["append", "set", "get", "del", "insert", "slice", "pop", "len"]), st.integers(-9, 9), st.integers(-9, 9)
        ),
        max_size=12,
    ),
)
def test_a_transcript_behaves_like_a_list(count: int, tail: int, operations: list[tuple[str, int, int]]) -> None:
    transcript, reference, _ = lazy(count, tail)
    for step, (operation, i, j) in enumerate(operations):
        outcomes = []
        for target in (transcript, reference):
            try:
                if operation == "append":
                    target.append(message(100 + step))
                    outcomes.append(None)
                elif operation == "set":
                    target[i] = message(200 + step)
                    outcomes.append(None)
                elif operation == "get":
                    outcomes.append(target[i])
                elif operation == "del":
                    del target[i]
                    outcomes.append(None)
                elif operation == "insert":
                    target.insert(i, message(300 + step))
                    outcomes.append(None)
                elif operation == "slice":
                    outcomes.append(list(target[i:j]))
                elif operation == "pop":
                    outcomes.append(target.pop(i))
                else:
                    outcomes.append(len(target))
            except IndexError:
                outcomes.append("IndexError")
        assert outcomes[0] == outcomes[1], (operation, i, j)
        assert len(transcript) == len(reference)
    assert transcript == reference


# A prefix that fails ---------------------------------------------------------------------------------
def test_a_prefix_that_fails_its_check_comes_from_the_fallback_or_raises() -> None:
    messages = [message(i) for i in range(4)]

    def damaged() -> bytes:
        raise ValueError("fails its checksum")

    reasons: list[str] = []

    def from_log(why: str) -> list[dict[str, Any]]:
        reasons.append(why)
        return messages[:3]

    assert Transcript(messages[3:], Prefix(3, damaged, from_log)) == messages and reasons == ["fails its checksum"]
    with pytest.raises(ValueError, match="checksum"):
        list(Transcript(messages[3:], Prefix(3, damaged)))
    wrong_count = Transcript(messages[3:], Prefix(3, Loader(messages[:2]), from_log))
    assert wrong_count == messages and "does not hold 3 messages" in reasons[-1]

    def log_damaged(why: str) -> list[dict[str, Any]]:
        raise LogCorruptError("s.jsonl", 2, 100, "bad checksum")

    broken = Transcript(messages[3:], Prefix(3, damaged, log_damaged))
    with pytest.raises(LogCorruptError):
        list(broken)
    assert broken.encoded == 3 and len(broken) == 4  # nothing half done: reading again tries again


# Through a session on disk -----------------------------------------------------------------------------
@pytest.fixture
def resumable(log_path: Path) -> Path:
    """A session of 60 events with a snapshot at its end, and 9 more events after it."""
    with Session.open(log_path, fsync="never", snapshot_every=10) as session:
        add_turns(session, 60)
    with Session.open(log_path, fsync="never", snapshot_every=0) as session:
        add_turns(session, 9, tag="tail")
    return log_path


def test_resuming_reads_only_the_header_and_the_state_line(resumable: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    line = snapshot.Snapshot._line

    def counted(self: snapshot.Snapshot, start: int, name: str) -> bytes:
        reads.append(name)
        return line(self, start, name)

    monkeypatch.setattr(snapshot.Snapshot, "_line", counted)
    expected = fold(read_events(resumable))
    with Session.open(resumable, snapshot_every=0) as session:
        state = session.state
        assert (state.frontier, state.open_calls, state.usage, state.title, state.turns, state.seq) == (
            expected.frontier,
            expected.open_calls,
            expected.usage,
            expected.title,
            expected.turns,
            expected.seq,
        )
        assert state.final_text == expected.final_text and len(state.messages) == len(expected.messages)
        assert session.snapshot_note == "" and reads == ["state"]
        assert isinstance(state.messages, Transcript) and state.messages.encoded > 20
        assert session.messages == expected.messages
        assert reads == ["state", "messages"]


def test_a_damaged_messages_line_falls_back_to_the_log(resumable: Path, caplog: pytest.LogCaptureFixture) -> None:
    snapshots.flip_messages_byte(resumable, b"request")
    expected = fold(read_events(resumable))
    with Session.open(resumable) as session:
        assert session.state.frontier == expected.frontier and session.snapshot_note == ""  # not read yet
        assert session.messages == expected.messages
        assert session.snapshot_note == "snapshot ignored (snapshot messages line fails its checksum); replayed the whole log"
        assert session.state == expected
    assert session.snapshot_note in caplog.text
    caplog.clear()
    with Session.open(resumable) as session:  # closing wrote a good one
        assert session.messages == expected.messages and session.snapshot_note == ""
    assert caplog.text == ""


def test_when_the_log_before_the_snapshot_is_damaged_too_its_error_is_raised(resumable: Path) -> None:
    snapshots.flip_messages_byte(resumable, b"request")
    data = bytearray(resumable.read_bytes())
    at = data.index(b"request 1")  # line 2, well before the snapshot
    data[at] = ord("R")
    resumable.write_bytes(bytes(data))
    with Session.open(resumable, snapshot_every=0) as session:  # opening reads only the log after the snapshot
        assert session.state.frontier == "model" and session.snapshot_note == ""
        with pytest.raises(LogCorruptError, match="line 2"):
            list(session.messages)
        assert session.state.messages.encoded > 0  # still not silently wrong: reading again raises again
        with pytest.raises(LogCorruptError):
            session.messages[0]


def test_a_resumed_sessions_messages_are_a_plain_list(resumable: Path) -> None:
    with Session.open(resumable, snapshot_every=0) as session:
        assert isinstance(session.state.messages, Transcript) and session.state.messages.encoded > 0
        messages = session.messages  # what users pass to json.dumps or to the SDK
        assert type(messages) is list and json.loads(json.dumps(messages)) == fold(read_events(resumable)).messages
        session.append(ev.USER_MSG, content="one more")
        assert session.messages is messages and messages == fold(read_events(resumable)).messages  # kept up to date


def test_a_snapshot_whose_state_disagrees_with_the_log_is_not_patched_up(resumable: Path) -> None:
    # A consistent snapshot that lies about the turns, and whose messages line is damaged:
    # the log cannot stand in for its messages, because the rest of the state is already in use.
    snapshots.rewrite_state(resumable, lambda state: state.update(turns=99))
    snapshots.flip_messages_byte(resumable, b"request")
    with Session.open(resumable, snapshot_every=0) as session:
        assert session.state.turns > 99  # from the snapshot, plus the requests after it
        with pytest.raises(LogError, match="does not match its log"):
            list(session.messages)


def test_messages_first_read_after_closing_come_from_this_snapshot_or_the_log(resumable: Path) -> None:
    expected = fold(read_events(resumable)).messages
    session = Session.open(resumable, snapshot_every=0)
    _ = session.state
    session.close()
    assert session.messages == expected  # the snapshot file is still the one it opened
    session = Session.open(resumable, snapshot_every=0)
    _ = session.state
    session.close()
    with Session.open(resumable, fsync="never") as other:  # another open writes a newer snapshot in its place
        add_turns(other, 20, tag="later")
    assert session.messages == expected and "replaced" in session.snapshot_note


def test_a_new_snapshot_splices_the_still_encoded_prefix(resumable: Path, tmp_path: Path) -> None:
    with Session.open(resumable, fsync="never", snapshot_every=0) as session:
        encoded = session.state.messages.encoded
        assert encoded > 20
        add_turns(session, 30, tag="after")
        session.snapshot()
        assert session.state.messages.encoded == encoded  # written without decoding the prefix
        add_turns(session, 10, tag="again")
        session.snapshot()
        assert session.state.messages.encoded == encoded
    expected = fold(read_events(resumable))
    assert history.verify(resumable).ok
    with Session.open(resumable, snapshot_every=0) as session:
        assert session.snapshot_note == "" and session.state.messages.encoded == len(expected.messages) - 1
        assert session.state == expected


def test_an_old_format_snapshot_is_ignored(resumable: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    shutil.copyfile(resumable, old)
    header, state_line, messages_line = snapshots.parts(resumable)
    state = json.loads(state_line)
    state["messages"] = json.loads(messages_line) + [state.pop("last_message")]
    del state["message_count"]
    body = json.dumps(state, separators=(",", ":")).encode()
    head = dict(header, v=1, body_len=len(body))
    snapshot.path_for(old).write_bytes(line_codec.seal(json.dumps(head, separators=(",", ":")).encode()) + b"\n" + body + b"\n")
    with Session.open(old, snapshot_every=0) as session:
        assert session.snapshot_note == f"snapshot ignored (snapshot format v1 is not v{snapshot.VERSION}); replayed the whole log"
        assert session.state == fold(read_events(old))
