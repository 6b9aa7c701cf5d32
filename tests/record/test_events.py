"""The event record: line encoding, checksums, ASCII-only lines and redaction of secrets, checked on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbagent import Session, read_events
from nbagent.record import events as ev
from nbagent.record import line_codec, redact

AWKWARD_TEXT = 'caf\u00e9 \u2028line\u2029sep \x85nel \U0001f600 "quoted" back\\slash\nnewline \t tab \x00 nul'


def _line(seq: int = 7, **payload: object) -> tuple[bytes, ev.Event]:
    return line_codec.encode(ev.make(seq, ev.TOOL_RESULT, {"tool_use_id": "toolu_01", "content": "3", **payload}))


def test_encode_decode_round_trip() -> None:
    event = ev.make(3, ev.ASSISTANT_MSG, {"content": [{"type": "text", "text": AWKWARD_TEXT}], "usage": {"input_tokens": 5}})
    line, written = line_codec.encode(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    back = line_codec.decode(line[:-1])
    assert back == written
    assert list(back)[:2] == ["v", "seq"] and list(back)[-1] == "crc"
    assert back["content"][0]["text"] == AWKWARD_TEXT
    assert line_codec.line_seq(line) == 3


def test_make_refuses_unknown_event_types() -> None:
    with pytest.raises(ValueError, match="unknown event type"):
        ev.make(1, "user_message", {})


def test_checksum_catches_a_one_byte_change_that_is_still_valid_json() -> None:
    line, _ = _line(content="1234")
    altered = line[:-1].replace(b'"content":"1234"', b'"content":"1235"')
    assert altered != line[:-1]
    json.loads(altered)  # still perfectly good JSON ...
    with pytest.raises(line_codec.BadLine, match="checksum"):  # ... but not the line that was written
        line_codec.decode(altered)


def test_checksum_catches_every_single_byte_change() -> None:
    line, _ = _line(content="some result text")
    body = line[:-1]
    for i in range(len(body)):
        for replacement in (b"0", b"x", b'"'):
            if body[i : i + 1] == replacement:
                continue
            damaged = body[:i] + replacement + body[i + 1 :]
            with pytest.raises(line_codec.BadLine):
                line_codec.decode(damaged)


@pytest.mark.parametrize(
    "damaged",
    [b"", b"{}", b'{"v":1,"seq":1', b'{"v":1,"seq":1,"type":"note","crc":"zzzzzzzz"}', b"\xff\xfe" * 20],
)
def test_decode_rejects_lines_that_are_not_records(damaged: bytes) -> None:
    with pytest.raises(line_codec.BadLine):
        line_codec.decode(damaged)


def test_lines_are_pure_ascii_and_one_line_for_every_reader(log_path: Path) -> None:
    with Session.open(log_path, fsync="never") as session:
        written = session.append(ev.USER_MSG, content=AWKWARD_TEXT)
    data = log_path.read_bytes()
    assert data.isascii()
    assert data.count(b"\n") == 2  # session_start and the user message
    # str.splitlines() also splits at U+2028, U+2029 and NEL: escaping keeps them out of the raw bytes.
    assert len(data.decode("ascii").splitlines()) == 2
    back = list(read_events(log_path))[-1]
    assert back == written and back["content"] == AWKWARD_TEXT


SHAPED_KEYS = [
    "sk-ant-api03-" + "Ab1_-" * 12,
    "sk-proj-" + "q" * 40,
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "ghp_" + "a1" * 18,
    "xoxb-" + "1234567890-abcdefghij",
]


@pytest.mark.parametrize("secret", SHAPED_KEYS, ids=["anthropic", "openai", "aws", "github", "slack"])
def test_key_shaped_strings_never_reach_the_file(log_path: Path, secret: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with Session.open(log_path, fsync="never") as session:
        user = session.append(ev.USER_MSG, content=f"my key is {secret}, keep it safe")
        nested = session.append(
            ev.ASSISTANT_MSG,
            content=[{"type": "tool_use", "id": "toolu_1", "name": "login", "input": {"token": secret, secret: 1}}],
            stop_reason="tool_use",
            usage={},
        )
        messages = session.messages
    data = log_path.read_bytes()
    assert secret.encode() not in data
    assert data.count(redact.REDACTED.encode()) == 3
    back = list(read_events(log_path))
    assert back[-2:] == [user, nested]  # what the caller holds is exactly what reads back
    assert user["content"] == f"my key is {redact.REDACTED}, keep it safe"
    assert nested["content"][0]["input"] == {"token": redact.REDACTED, redact.REDACTED: 1}
    assert secret not in json.dumps(messages)


@pytest.mark.parametrize(
    "secret",
    ["my-own-secret-value-12345", 'odd"key\\with/\u00e9-and-more', "short-but-8"],
    ids=["plain", "needs-escaping", "eight-chars"],
)
def test_the_exact_api_key_from_the_environment_never_reaches_the_file(
    log_path: Path, secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    with Session.open(log_path, fsync="never") as session:
        event = session.append(ev.TOOL_STARTED, tool_use_id="t", name="env", effect="read", attempt=1)
        result = session.append(ev.NOTE, text=f"env says ANTHROPIC_API_KEY={secret}!", nested={"deep": [secret]})
    data = log_path.read_bytes()
    assert json.dumps(secret, ensure_ascii=True)[1:-1].encode() not in data
    assert secret.encode("utf-8") not in data
    back = list(read_events(log_path))
    assert back[-2:] == [event, result]
    assert result["text"] == f"env says ANTHROPIC_API_KEY={redact.REDACTED}!" and result["nested"] == {"deep": [redact.REDACTED]}


def test_ordinary_text_is_not_redacted(log_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")  # too short to be matched anywhere
    ordinary = "ask sk-learn about AKIA and skiing; task-ant-colony k k"
    with Session.open(log_path, fsync="never") as session:
        event = session.append(ev.USER_MSG, content=ordinary)
    assert event["content"] == ordinary
    assert redact.REDACTED.encode() not in log_path.read_bytes()


def test_durable_types() -> None:
    assert ev.is_durable(ev.ASSISTANT_MSG, {}) and ev.is_durable(ev.TOOL_RESULT, {}) and ev.is_durable(ev.USER_MSG, {})
    assert not ev.is_durable(ev.DELTA, {"text": "x"}) and not ev.is_durable(ev.MODEL_CALL, {})
    assert ev.is_durable(ev.TOOL_STARTED, {"effect": "write"}) and ev.is_durable(ev.TOOL_STARTED, {"effect": "irreversible"})
    assert not ev.is_durable(ev.TOOL_STARTED, {"effect": "read"})
    assert not ev.is_durable(ev.TOOL_RESULT, {"effect": "read"}) and ev.is_durable(ev.TOOL_RESULT, {"effect": "write"})
    assert ev.is_durable(ev.COMPACTION_STARTED, {}) and ev.is_durable(ev.COMPACTION, {}) and ev.is_durable(ev.CONTEXT, {})


def test_a_key_streamed_across_several_deltas_never_reaches_the_file(log_path: Path, fake, client) -> None:
    from nbagent import AnthropicModel, Loop
    from tests.support.fake_anthropic import text

    secret = SHAPED_KEYS[0]
    fake.script(text(f"Your key is {secret}.", chunks=6))
    with Session.open(log_path, fsync="never") as session:
        # delta_interval=0: a line per delta, the most cuts a stream can get
        Loop(session, model=AnthropicModel("claude-test", client=client), delta_interval=0).run("what is my key?")
    streamed = [e["text"] for e in read_events(log_path) if e["type"] == ev.DELTA]
    assert len(streamed) >= 2  # still streamed in pieces, cut only where no secret can straddle
    assert "".join(streamed) == "Your key is [REDACTED]."
    data = log_path.read_bytes()
    assert secret.encode() not in data
    assert secret.encode() not in b"".join(e.get("text", "").encode() for e in read_events(log_path))
