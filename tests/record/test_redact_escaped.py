"""Private keys in every written form (issue 33, item 2): escaped line breaks, JSON text, clipped heads and tails.

The rule runs on an encoded JSON line, where a real line break is ``\\n``, a ``repr()``'s ``\\n`` is ``\\\\n`` and JSON
text inside a string doubles it again; a clipped output may keep a key's END line without its BEGIN line.
"""

from __future__ import annotations

import json
import random
import string

import pytest

from nbagent.record import redact
from nbagent.tools.clipping import clipped

R = random.Random(33)
B64 = string.ascii_letters + string.digits + "+/"
LINES = ["".join(R.choice(B64) for _ in range(64)) for _ in range(25)] + ["".join(R.choice(B64) for _ in range(22)) + "=="]
BODY = "\n".join(LINES)
KEY = "-----BEGIN PRIVATE KEY-----\n" + BODY + "\n-----END PRIVATE KEY-----\n"
RSA = KEY.replace("PRIVATE KEY", "RSA PRIVATE KEY")
ENCRYPTED = KEY.replace("PRIVATE KEY", "ENCRYPTED PRIVATE KEY")
SERVICE_ACCOUNT = json.dumps(
    {"type": "service_account", "project_id": "demo", "private_key_id": "0" * 40, "private_key": KEY, "client_email": "a@demo.iam"},
    indent=2,
)
WINDOW = 12  # no run of this many characters of the key's body may survive


def numbered(text: str, first: int = 1) -> str:
    """``text`` as read_file shows it: each line after its number and a tab."""
    return "\n".join(f"{first + i:6}\t{line}" for i, line in enumerate(text.splitlines()))


def leaked(out: str) -> str | None:
    """A piece of the key's body that is still in ``out``, if any."""
    for line in LINES:
        for i in range(max(1, len(line) - WINDOW + 1)):
            if line[i : i + WINDOW] in out:
                return line[i : i + WINDOW]
    return None


# (name, text holding the key or a part of it)
FORMS = [
    ("real-line-breaks", KEY),
    ("crlf", KEY.replace("\n", "\r\n")),
    ("repr", repr(KEY)),
    ("repr-crlf", repr(KEY.replace("\n", "\r\n"))),
    ("literal-backslash-n-in-a-cell", f"key = {KEY!r}\nsign(key)"),
    ("rsa-repr", repr(RSA)),
    ("encrypted-pkcs8", ENCRYPTED),
    ("service-account-json", SERVICE_ACCOUNT),
    ("service-account-json-crlf", json.dumps({"private_key": KEY.replace("\n", "\r\n")})),
    ("service-account-repr", repr(SERVICE_ACCOUNT)),  # JSON text in a repr(): \\n doubled
    ("service-account-in-a-json-string", json.dumps(SERVICE_ACCOUNT)),
    ("service-account-read-file", numbered(SERVICE_ACCOUNT)),
    ("end-clipped-repr", repr(KEY)[:400] + "… [1,234 more characters]"),
    ("begin-clipped", KEY[70:]),
    ("begin-clipped-mid-line", KEY[45:]),
    ("begin-clipped-repr", repr(KEY)[90:]),
    ("begin-clipped-crlf-repr", repr(KEY.replace("\n", "\r\n"))[90:]),
    ("begin-clipped-service-account", SERVICE_ACCOUNT[150:]),
    ("begin-clipped-read-file", numbered(KEY, 40).split("\n", 3)[3]),
    ("traceback-tail", "[612 characters before] …" + repr(KEY)[120:]),
    ("head-tail-clip", clipped("x" * 3000 + KEY, 2000)),
    ("head-tail-clip-repr", clipped(repr("x" * 3000 + KEY), 2000)),
    ("head-tail-clip-through-the-key", clipped(KEY + "y" * 1500, 2000)),
]


@pytest.mark.parametrize("text", [f[1] for f in FORMS], ids=[f[0] for f in FORMS])
def test_every_written_form_of_a_private_key_is_redacted(text: str) -> None:
    assert leaked(text) is not None  # the case does hold key material
    for out in (redact.text(text), redact.json_body(json.dumps({"content": text}))):
        assert leaked(out) is None, out
        assert redact.REDACTED in out
    json.loads(redact.json_body(json.dumps({"content": text})))  # still valid JSON


SURVIVORS = [
    ("prose", "A PEM file ends with -----END PRIVATE KEY----- on a line of its own."),
    ("prose-on-lines", "private key notes:\nthe END line reads\n-----END PRIVATE KEY----- in the file."),
    ("word-list", "private key\nalpha\nbeta\ngamma"),
    ("certificate", "-----BEGIN CERTIFICATE-----\n" + BODY + "\n-----END CERTIFICATE-----\n"),
    ("base64-lines-without-an-end", "PRIVATE KEY material follows\n" + BODY),
]


@pytest.mark.parametrize("text", [s[1] for s in SURVIVORS], ids=[s[0] for s in SURVIVORS])
def test_text_that_is_no_key_survives(text: str) -> None:
    assert redact.text(text) == text
    assert redact.text(repr(text)) == repr(text)


def test_text_around_a_clipped_key_stays() -> None:
    out = redact.text("[612 characters before] …" + KEY[70:] + "done")
    assert out == "[612 characters before] …[REDACTED]\ndone"
    assert redact.text(SERVICE_ACCOUNT).endswith('"private_key": "[REDACTED]\\n",\n  "client_email": "a@demo.iam"\n}')
