"""A gateway's credentials are redacted (issue 33, item 7): a token in ``ANTHROPIC_CUSTOM_HEADERS`` and a password in
the base URL's userinfo, echoed back by the gateway's error, reach neither the log, ``nbagent show``/``tail --json``
(real subprocesses) nor the raised error."""

from __future__ import annotations

import base64
import json
import os
import random
import string
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import nbagent
from nbagent.agent.session import Session
from nbagent.errors import ModelError
from nbagent.model.clients import header_secrets, url_secrets
from nbagent.record import redact
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, Reply, error

pytestmark = pytest.mark.sdk

R = random.Random(3307)
TOKEN = "gw-" + "".join(R.choice(string.ascii_lowercase + string.digits) for _ in range(28))  # matches no key shape
PASSWORD = "pw" + "".join(R.choice(string.ascii_letters + string.digits) for _ in range(18))
USER = "notebook-team"
NBAGENT = Path(sys.executable).with_name("nbagent")


@pytest.mark.parametrize(
    ("headers", "secrets"),
    [
        ({"X-Gateway-Token": "gw-123456789"}, ["gw-123456789"]),
        ({"cf-aig-authorization": "Bearer abcdefghij123"}, ["Bearer abcdefghij123", "abcdefghij123"]),
        ({"X-Portkey-Api-Key": "pk-1234567890"}, ["pk-1234567890"]),
        ({"Ocp-Apim-Subscription-Key": " 0123456789abcdef "}, ["0123456789abcdef"]),
        ({"X-Route": "Bearer 0123456789"}, ["Bearer 0123456789", "0123456789"]),  # a scheme says it, whatever the name
        ({"Cookie": "session=abcdef0123456789"}, ["session=abcdef0123456789"]),
        ({"X-Team": "analytics", "x-portkey-provider": "anthropic", "anthropic-version": "2023-06-01"}, []),
        ({"Accept": "application/json", "User-Agent": "Anthropic/Python 2.17.0", "X-Stainless-Lang": "python"}, []),
        ({"X-Api-Key": ""}, []),
    ],
)
def test_header_secrets(headers: dict[str, str], secrets: list[str]) -> None:
    assert header_secrets(headers) == secrets


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        ("https://alice:s3cret-pass@gw.example.com/v1", ["s3cret-pass", "s3cret-pass", b"alice:s3cret-pass"]),
        ("https://alice:p%40ss%3Aword@gw.example.com", ["p%40ss%3Aword", "p@ss:word", b"alice:p@ss:word"]),
        ("https://:only-password@gw.example.com", ["only-password", "only-password", b":only-password"]),
        ("https://alice@gw.example.com", []),
        ("https://gw.example.com:8443/v1", []),
        ("http://[::1", []),  # malformed: nothing found, no error
    ],
)
def test_url_secrets(url: str, secrets: list[str | bytes]) -> None:
    assert url_secrets(url) == secrets


def echo_everything(request: RecordedRequest) -> Reply:
    """A gateway refusing the request and echoing what it got: every header, the Basic credentials, the URL it was sent to."""
    basic = request.headers.get("authorization", "").removeprefix("Basic ")
    user_password = base64.b64decode(basic).decode() if basic and " " not in basic else ""
    where = f"http://{user_password}@{request.headers.get('host')}{request.path}"
    said = f"gateway refused {where}; password {user_password.partition(':')[2]!r}; headers {json.dumps(request.headers)}"
    return error(403, "permission_error", said)


def test_a_gateway_echoing_its_credentials_is_redacted_everywhere(
    fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = fake.base_url.split("://", 1)[1]
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://{USER}:{PASSWORD}@{host}")
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", f"X-Gateway-Token: {TOKEN}\nX-Team: analytics")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    fake.script(echo_everything)
    path = tmp_path / "s.jsonl"
    with Session.open(path) as session, pytest.raises(ModelError) as raised:
        nbagent.run(session, "hello", model="claude-test")
    [request] = fake.requests
    assert request.headers["x-gateway-token"] == TOKEN  # the attack is real: both were sent and echoed back
    assert base64.b64decode(request.headers["authorization"].removeprefix("Basic ")).decode() == f"{USER}:{PASSWORD}"
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    err = raised.value
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}  # the CLI holds none of them
    shown = subprocess.run([str(NBAGENT), "show", str(path)], capture_output=True, text=True, timeout=120, env=env)
    tailed = subprocess.run([str(NBAGENT), "tail", str(path), "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert shown.returncode == 0 and tailed.returncode == 0, (shown.stderr, tailed.stderr)
    assert "gateway refused" in shown.stdout and "gateway refused" in tailed.stdout and "analytics" in tailed.stdout
    texts = {
        "error": str(err),
        "traceback": "".join(traceback.format_exception(err)),
        "log": path.read_text(),
        "show": shown.stdout + shown.stderr,
        "tail --json": tailed.stdout + tailed.stderr,
    }
    for where, data in texts.items():
        assert redact.REDACTED in data, where
        for secret in (TOKEN, PASSWORD, basic):
            assert secret not in data, (where, secret)
