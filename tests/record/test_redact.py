"""Secret redaction (nbagent.record.redact): key shapes, held values, verbatim thinking blocks, and errors that echo the key.

Every value here is generated and obviously fake, but shaped like the real thing.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import string
import traceback
import uuid
from pathlib import Path

import anthropic
import nbformat
import pytest

import nbagent
from nbagent import history, render
from nbagent.agent.session import Session
from nbagent.cli import export
from nbagent.cli.main import main as cli
from nbagent.errors import ModelError
from nbagent.record import events as ev
from nbagent.record import line_codec, redact, signing
from nbagent.stores import snapshot
from reliability.attacker import write_log
from tests.support.fake_anthropic import FakeAnthropic, auth_error_echoing_key

R = random.Random(20240601)
ALNUM = string.ascii_letters + string.digits


def fake(alphabet: str, n: int) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


LOWER_HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + "234567"
AWS_SECRET = fake(ALNUM + "/+", 40)
PEM_BODY = "\n".join(fake(ALNUM + "+/", 64) for _ in range(4))
URL_PASSWORD = fake(ALNUM, 16)
URL_HOST = "@db.example.com:5432/app"

# (name, text as it appears, the secret part that must go, a part that must stay)
FORMATS = [
    ("anthropic", "sk-ant-api03-" + fake(ALNUM + "_-", 60) + "AA", None, ""),
    ("openai-project", "sk-proj-" + fake(ALNUM, 48), None, ""),
    ("openai-legacy", "sk-" + fake(ALNUM, 20) + "T3BlbkFJ" + fake(ALNUM, 20), None, ""),
    ("aws-key-id", "AKIA" + "ABCDEFGHIJKLMNOP", None, ""),
    ("aws-session-id", "ASIA" + fake(UPPER_DIGITS, 16), None, ""),
    ("aws-secret-ini", "aws_secret_access_key = " + AWS_SECRET, AWS_SECRET, "aws_secret_access_key = "),
    ("aws-secret-env", "AWS_SECRET_ACCESS_KEY=" + AWS_SECRET, AWS_SECRET, "AWS_SECRET_ACCESS_KEY="),
    ("aws-secret-json", '{"AccessKeyId": "x", "SecretAccessKey": "' + AWS_SECRET + '"}', AWS_SECRET, '"SecretAccessKey": "'),
    ("github-classic", "ghp_" + fake(ALNUM, 36), None, ""),
    ("github-oauth", "gho_" + fake(ALNUM, 36), None, ""),
    ("github-fine-grained", "github_pat_" + fake(ALNUM, 22) + "_" + fake(ALNUM, 59), None, ""),
    ("gitlab", "glpat-" + fake(ALNUM, 20), None, ""),
    ("jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + fake(ALNUM + "_-", 43), None, ""),
    ("slack-token", "xoxb-" + fake(string.digits, 12) + "-" + fake(string.digits, 12) + "-" + fake(ALNUM, 24), None, ""),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/T" + fake(UPPER_DIGITS, 8) + "/B" + fake(UPPER_DIGITS, 8) + "/" + fake(ALNUM, 24),
        None,
        "",
    ),
    ("stripe", "sk_live_" + fake(ALNUM, 24), None, ""),
    ("twilio", "SK" + fake(LOWER_HEX, 32), None, ""),
    ("sendgrid", "SG." + fake(ALNUM, 22) + "." + fake(ALNUM, 43), None, ""),
    ("npm", "npm_" + fake(ALNUM, 36), None, ""),
    ("pypi", "pypi-AgEIcHlwaS5vcmc" + fake(ALNUM, 80), None, ""),
    ("discord", "M" + fake(ALNUM, 23) + "." + fake(ALNUM, 6) + "." + fake(ALNUM, 27), None, ""),
    ("telegram", "bot " + fake(string.digits, 9) + ":" + fake(ALNUM, 35), None, "bot "),
    ("mailchimp", fake(LOWER_HEX, 32) + "-us12", None, ""),
    ("square", "sq0csp-" + fake(ALNUM, 43), None, ""),
    ("artifactory", "token AKC" + fake(ALNUM, 60) + " end", None, "token "),
    ("azure-storage", "DefaultEndpointsProtocol=https;AccountKey=" + fake(ALNUM, 86) + "==;EndpointSuffix=x", None, "AccountKey="),
    ("google", "AIza" + fake(ALNUM + "_-", 35), None, ""),
    ("huggingface", "hf_" + fake(ALNUM, 34), None, ""),
    ("bearer", "Authorization: Bearer " + fake(ALNUM, 40), None, "Authorization: Bearer "),
    ("url-password", "postgresql://alice:" + URL_PASSWORD + URL_HOST, URL_PASSWORD, "postgresql://alice:"),
    ("pem-rsa", "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----", PEM_BODY, ""),
    ("openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "\n-----END OPENSSH PRIVATE KEY-----", PEM_BODY, ""),
]
FORMATS = [
    (name, text, secret if secret is not None else text.replace(keep, "").replace(" end", ""), keep) for name, text, secret, keep in FORMATS
]
PNG_B64 = base64.b64encode(bytes(R.randrange(256) for _ in range(300))).decode()
SURVIVORS = [
    ("git-sha", hashlib.sha1(b"nbagent").hexdigest()),
    ("sha256", hashlib.sha256(b"nbagent").hexdigest()),
    ("png-base64", PNG_B64),
    ("uuid", str(uuid.UUID(int=R.getrandbits(128)))),
    ("prose", "Ask the task-runner about AKIA and sk-learn; bearer of good news, the private key idea, aws docs."),
    ("base64-40-no-keyword", "value = " + fake(ALNUM + "/+", 40)),
    ("url-no-password", "see https://user@example.com:8080/path?q=1#x and postgresql://db.example.com/app"),
    ("hex-after-aws-no-quote", "aws region eu-west-1, sha " + hashlib.sha1(b"x").hexdigest()),
]


def _session_with(path: Path, value: str) -> None:
    """The value in a request, a tool result and a model error (a python call prints it), then a snapshot."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "python", "input": {"code": "print(secret)"}}
    error = {"message": f"failed with {value}", "status": 400, "kind": "invalid_request_error", "retryable": False, "attempt": 1}
    events = [
        (ev.USER_MSG, {"content": f"please use {value} now"}),
        (ev.ASSISTANT_MSG, {"stop_reason": "tool_use", "usage": {}, "content": [{"type": "text", "text": "running it"}, call]}),
        (ev.TOOL_RESULT, {"tool_use_id": "toolu_1", "content": [{"type": "text", "text": f"out:\n{value}\n"}]}),
        (ev.MODEL_ERROR, error),
    ]
    write_log(path, events, snapshot=True, snapshot_every=0)


@pytest.mark.parametrize(("text", "secret", "keep"), [f[1:] for f in FORMATS], ids=[f[0] for f in FORMATS])
def test_every_format_is_redacted_in_the_log_and_exports(tmp_path: Path, text: str, secret: str, keep: str) -> None:
    path = tmp_path / "s.jsonl"
    _session_with(path, text)
    events = list(nbagent.read_events(path))
    user, result, error = events[1], events[3], events[4]
    files = {"log": path.read_bytes(), "snapshot": snapshot.path_for(path).read_bytes()}
    files["md"] = export.to_markdown(events).encode()
    files["ipynb"] = nbformat.writes(export.to_notebook(events)).encode()
    for where, data in files.items():
        assert secret.encode() not in data, where
        assert json.dumps(secret)[1:-1].encode() not in data, where
    for shown in (user["content"], result["content"][0]["text"], error["message"]):
        assert redact.REDACTED in shown and secret not in shown
        assert keep in shown
    assert redact.text(text) != text and secret not in redact.text(text)


def test_url_password_keeps_user_and_host() -> None:
    url = "postgresql://alice:" + fake(ALNUM, 16) + URL_HOST
    assert redact.text(url) == "postgresql://alice:[REDACTED]" + URL_HOST
    assert redact.text("mysql://bob:p@ss" + "w0rd@h/db") == "mysql://bob:[REDACTED]@h/db"


def test_a_truncated_private_key_is_redacted_to_the_end_of_its_string() -> None:
    cut = "key:\n-----BEGIN EC PRIVATE KEY-----\n" + PEM_BODY[:100]
    assert redact.text(cut) == "key:\n[REDACTED]"
    prose = "A PEM file starts with -----BEGIN RSA PRIVATE KEY----- and ends with the END line."
    assert redact.text(prose) == prose


@pytest.mark.parametrize("value", [s[1] for s in SURVIVORS], ids=[s[0] for s in SURVIVORS])
def test_ordinary_values_survive_unchanged(tmp_path: Path, value: str) -> None:
    path = tmp_path / "s.jsonl"
    with Session.open(path, fsync="never") as session:
        user = session.append(ev.USER_MSG, content=value)
        result = session.append(ev.NOTE, text=value, data=[{"type": "image", "source": {"type": "base64", "data": value}}])
    assert user["content"] == value and result["text"] == value
    assert redact.REDACTED.encode() not in path.read_bytes()
    assert redact.text(value) == value


@pytest.mark.parametrize(
    "name",
    [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "HF_TOKEN",
        "OPENAI_API_KEY",
    ],
)
def test_credential_env_values_of_any_shape_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    value = "zz custom " + name.lower() + " " + fake(ALNUM, 10)  # matches no pattern: only the env value can catch it
    monkeypatch.setenv(name, value)
    path = tmp_path / "s.jsonl"
    with Session.open(path, fsync="never") as session:
        event = session.append(ev.TOOL_RESULT, tool_use_id="t", content=f"env: {value}.")
    assert value.encode() not in path.read_bytes() and event["content"] == f"env: {redact.REDACTED}."
    assert redact.text(f"x{value}x") == f"x{redact.REDACTED}x"
    monkeypatch.delenv(name)
    assert redact.text(value) == value  # read at redaction time: gone from the env, no longer redacted


def test_registered_values_and_the_signing_secret_are_redacted(tmp_path: Path) -> None:
    odd = "my odd value " + fake(ALNUM, 12)
    redact.register(odd)
    redact.register("short")  # under 8 characters: ignored
    signing.signer()
    secret = signing.load_secret()
    assert secret is not None
    forms = [secret.hex(), base64.b64encode(secret).decode(), base64.urlsafe_b64encode(secret).decode().rstrip("=")]
    path = tmp_path / "s.jsonl"
    with Session.open(path, fsync="never") as session:
        session.append(ev.NOTE, text=" | ".join([odd, *forms, "a short story"]))
    data = path.read_bytes()
    for value in (odd, *forms):
        assert value.encode() not in data and value not in redact.text(f"[{value}]")
    assert b"a short story" in data


def test_values_with_json_escapes_never_break_a_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", 'nq"uote\\back-' + fake(ALNUM, 8))
    value = "\n" + "q" + fake(LOWER_HEX, 31) + "-us1 é " + "\u00e9" + fake(LOWER_HEX, 32) + "-us2"
    path = tmp_path / "s.jsonl"
    with Session.open(path, fsync="never") as session:
        event = session.append(ev.NOTE, text=value + " " + 'nq"uote\\back-', nested={value: [value]})
    assert list(nbagent.read_events(path))[-1] == event
    assert "-us1" not in json.dumps(event) and "-us2" not in json.dumps(event)


# Thinking and compaction blocks: verbatim in the log, redacted wherever shown --------------------------
def test_thinking_blocks_round_trip_verbatim_but_are_shown_redacted(tmp_path: Path) -> None:
    key = "sk-ant-api03-" + fake(ALNUM, 50)
    aws = "AKIA" + fake(UPPER_DIGITS, 16)
    blocks = [
        {"type": "thinking", "thinking": f"The user's key is {key}; and {aws}.", "signature": "EqQBCkYIBxgCKkB" + fake(ALNUM, 80)},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy" + key},
        {"type": "text", "text": f"I will not repeat {key}."},
        {"type": "compaction", "content": f"Summary: the key {key} was used."},
    ]
    path = tmp_path / "s.jsonl"
    with Session.open(path, fsync="never") as session:
        session.append(ev.USER_MSG, content="hello")
        written = session.append(ev.ASSISTANT_MSG, stop_reason="end_turn", usage={}, content=json.loads(json.dumps(blocks)))
        session.append(ev.USER_MSG, content=f"and {key}?")
    data = path.read_bytes()
    for block in (blocks[0], blocks[1], blocks[3]):
        assert line_codec._ENCODER.encode(block).encode() in data  # byte for byte
    assert written["content"][2]["text"] == f"I will not repeat {redact.REDACTED}."
    assert data.count(key.encode()) == 3  # only inside the three protected blocks
    with Session.open(path, fsync="never") as session:
        # The compaction block starts the request (the API drops what is before it): the thinking before it is not sent.
        assert session.messages[0] == {"role": "assistant", "content": [blocks[3]]}
        assert key not in json.dumps(session.messages[1])
    with Session.open(tmp_path / "t.jsonl", fsync="never") as session:
        session.append(ev.USER_MSG, content="hello")
        session.append(ev.ASSISTANT_MSG, stop_reason="end_turn", usage={}, content=json.loads(json.dumps(blocks[:3])))
    with Session.open(tmp_path / "t.jsonl", fsync="never") as session:
        assert session.messages[1]["content"][:2] == blocks[:2]  # sent back exactly as the API returned them
    events = list(nbagent.read_events(path))
    shown = {
        "html": render.transcript_html(events),
        "text": render.transcript_text(events),
        "md": export.to_markdown(events),
        "ipynb": nbformat.writes(export.to_notebook(events)),
    }
    out = io.StringIO()
    history.transcript(events, out)
    shown["printer"] = out.getvalue()
    shown["search"] = json.dumps([list(history.searchable(e)) for e in events])
    for where, value in shown.items():
        assert key not in value and aws not in value, where
    assert redact.REDACTED in render.event_html(events[2])  # the thinking is shown, redacted
    assert "The user&#x27;s key is" in render.event_html(events[2])


def test_protected_blocks_cost_nothing_when_absent_and_stay_exact_when_present() -> None:
    body = line_codec._ENCODER.encode({"type": "user_msg", "content": "nothing here"})
    assert redact.json_body(body) is body
    assert redact.verbatim_blocks({"type": "user_msg", "content": [{"type": "thinking", "thinking": "x"}]}) == []


# Errors that echo the key ----------------------------------------------------------------------------
def _assert_no_key(key: str, *texts: str | bytes) -> None:
    for value in texts:
        data = value.encode() if isinstance(value, str) else value
        assert key.encode() not in data
        assert key[:20].encode() not in data


@pytest.mark.parametrize("shape", ["anthropic", "odd-env"])
def test_a_401_that_echoes_the_key_leaks_it_nowhere(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    if shape == "anthropic":
        key = "sk-ant-api03-" + fake_value(60)
        client = anthropic.Anthropic(base_url=fake.base_url, api_key=key, max_retries=0)
    else:
        key = "zz-custom-key-" + fake_value(24)  # matches no pattern
        monkeypatch.setenv("ANTHROPIC_API_KEY", key)
        client = anthropic.Anthropic(base_url=fake.base_url, max_retries=0)
    fake.script(auth_error_echoing_key)
    path = tmp_path / "s.jsonl"
    with Session.open(path, fsync="never") as session:
        with pytest.raises(ModelError) as caught:
            nbagent.run(session, "hello", model="claude-test", client=client)
        session.snapshot()
    assert key in _sent_key(fake)  # the key was sent, and the server echoes it
    err = caught.value
    assert err.status == 401 and redact.REDACTED in str(err)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    os_cwd = Path.cwd()
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert cli(["export", str(path), "-o", "s.md"], out=out, err=io.StringIO()) == 0
    assert cli(["export", str(path), "-o", "s.ipynb"], out=out, err=io.StringIO()) == 0
    monkeypatch.chdir(os_cwd)
    model_errors = [e for e in nbagent.read_events(path) if e["type"] == ev.MODEL_ERROR]
    assert model_errors and redact.REDACTED in model_errors[0]["message"]
    _assert_no_key(
        key,
        str(err),
        "".join(traceback.format_exception(err)),
        path.read_bytes(),
        snapshot.path_for(path).read_bytes(),
        (tmp_path / "s.md").read_bytes(),
        (tmp_path / "s.ipynb").read_bytes(),
    )


def test_the_magic_shows_a_401_without_the_key(shell, fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    key = "zz-notebook-key-" + fake_value(24)
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    fake.script(auth_error_echoing_key)
    result = shell.run_cell("%agent hello")
    assert key in _sent_key(fake)
    assert result.error_in_exec is not None
    shown = capsys.readouterr()
    assert redact.REDACTED in str(result.error_in_exec)
    logs = list((tmp_path / ".nbagent").rglob("*.jsonl"))
    assert logs
    _assert_no_key(key, str(result.error_in_exec), shown.out, shown.err, *(p.read_bytes() for p in logs))


def _sent_key(server: FakeAnthropic) -> str:
    headers = server.requests[-1].headers
    return headers.get("x-api-key") or headers.get("authorization", "")


def fake_value(n: int) -> str:
    return fake(ALNUM, n)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {"path": "id_rsa"}),
        ("shell", {"command": "cat -n id_rsa"}),
        ("shell", {"command": "grep -n . id_rsa"}),
        ("shell", {"command": "grep -Hn . id_rsa"}),
    ],
    ids=["read_file", "cat -n", "grep -n", "grep -Hn"],
)
def test_a_private_key_read_with_line_numbers_is_redacted_like_without(
    fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str, arguments: dict[str, str]
) -> None:
    """Each line of a numbered listing starts with its number: the whole-block rule must still see the key material."""
    from nbagent.tools.builtin import default_tools
    from tests.support.fake_anthropic import text, tool_use

    monkeypatch.chdir(tmp_path)
    (tmp_path / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "\n-----END OPENSSH PRIVATE KEY-----\n")
    fake.script(tool_use(tool, arguments), text("read it"))
    client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
    path = tmp_path / "s.jsonl"
    with Session.open(path) as session:
        nbagent.run(session, "show me the key", client=client, model="claude-test", tools=default_tools(), approval="auto")
    events = list(nbagent.read_events(path))
    result = next(e for e in events if e["type"] == ev.TOOL_RESULT)
    assert redact.REDACTED in json.dumps(result["content"]) and not result.get("is_error")
    files = {"log": path.read_bytes(), "snapshot": snapshot.path_for(path).read_bytes(), "md": export.to_markdown(events).encode()}
    for line in PEM_BODY.splitlines():
        for where, data in files.items():
            assert line.encode() not in data, where
        assert line not in json.dumps(fake.requests[-1].body)  # nor did the model see it
