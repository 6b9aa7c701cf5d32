"""Redaction of secrets: every log line before it is written, and text shown, printed, exported or raised.

Two kinds of secret are replaced by ``[REDACTED]``:

* strings shaped like credentials: the low-false-positive, key-shaped patterns of
  Yelp's ``detect-secrets`` (its ``denylist`` regexes, read at first use) plus
  shapes it lacks (Anthropic, fine-grained GitHub, Google, Hugging Face, bearer
  tokens, whole private key blocks, AWS secret keys next to their keyword,
  passwords in URLs);
* the values this process actually holds, whatever their shape: credential
  environment variables (read at redaction time) and values handed to
  :func:`register` (the SDK client's key, nbagent's own signing secret).

The shapes are listed in :mod:`nbagent.record.secret_shapes`.  Where a pattern has a keyword or a URL
around the secret, only the secret is replaced (``Authorization: Bearer [REDACTED]``, ``postgresql://user:[REDACTED]@host``).

Redaction works on an encoded JSON line (:func:`json_body`) with one combined
regex, so the common case (nothing found) is a single ``search``.  A match never
cuts a JSON escape in half; should a substitution still leave invalid JSON, the
line is redacted string by string and a string that cannot be redacted cleanly
is replaced whole (fail closed).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from . import secret_shapes
from .secret_shapes import Rule

REDACTED = "[REDACTED]"
MIN_LENGTH = 8  # shorter values are not registered: they would match ordinary text

# Environment variables whose values are redacted wherever they appear.
ENV_NAMES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",  # a Bedrock API key (providers.py)
    "ANTHROPIC_FOUNDRY_API_KEY",  # a Microsoft Foundry key (providers.py)
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "OPENAI_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
)

# Content blocks the API verifies and needs back unchanged: kept verbatim in the (owner-only) log.
VERBATIM_BLOCK_TYPES = frozenset({"thinking", "redacted_thinking", "compaction"})

_lock = threading.Lock()
_registered: dict[str, None] = {}  # insertion-ordered set
_registered_key: tuple[str, ...] = ()


def register(value: str | bytes | None) -> None:
    """Redact ``value`` wherever it appears from now on (bytes: their hex and base64 forms); shorter than 8 characters: ignored."""
    global _registered_key
    if value is None:
        return
    forms = _forms_of_bytes(value) if isinstance(value, (bytes, bytearray)) else [str(value)]
    with _lock:
        added = False
        for form in forms:
            if len(form) >= MIN_LENGTH and form not in _registered:
                _registered[form] = None
                added = True
        if added:
            _registered_key = tuple(_registered)


def _forms_of_bytes(value: bytes | bytearray) -> list[str]:
    raw = bytes(value)
    standard, urlsafe = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    return [raw.hex(), raw.hex().upper(), standard, standard.rstrip("="), urlsafe, urlsafe.rstrip("=")]


def _held_values() -> tuple[str, ...]:
    """The secret values this process holds now: credential env vars and registered values."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict) and _ENV_KEYS is not None:  # CPython: read the raw mapping, ~10x cheaper than get()
        found = _env_values(tuple(map(data.get, _ENV_KEYS)))
    else:
        found = tuple(v for v in map(os.environ.get, ENV_NAMES) if v and len(v) >= MIN_LENGTH)
    return found + _registered_key if _registered_key else found


try:
    _ENV_KEYS: tuple[Any, ...] | None = tuple(os.environ.encodekey(name) for name in ENV_NAMES)
except AttributeError:
    _ENV_KEYS = None


@functools.lru_cache(maxsize=16)
def _env_values(raw: tuple[Any, ...]) -> tuple[str, ...]:
    decode = os.environ.decodevalue
    return tuple(v for v in (decode(r) for r in raw if r is not None) if len(v) >= MIN_LENGTH)


def text(s: str) -> str:
    """``s`` with secrets replaced (for display, printing, exports and exception messages)."""
    return _string(s, _redactor(_held_values())) if s else s


def json_body(body: str, keep: Sequence[str] = ()) -> str:
    """An encoded JSON value with secrets replaced (the same object if nothing was found).

    ``keep`` are encoded JSON fragments of ``body`` (content blocks, see :func:`verbatim_blocks`)
    that are left exactly as they are.  The result is always valid JSON.
    """
    redactor = _redactor(_held_values())
    out = redactor.sub(body, _spans(body, keep) if keep else ())
    if out is body:
        return body
    try:
        json.loads(out)
    except ValueError:
        return _by_string(body, redactor, set(keep))
    return out


def verbatim_blocks(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of an assistant message that must be logged verbatim (thinking, redacted_thinking, compaction)."""
    if event.get("type") != "assistant_msg":
        return []
    content = event.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") in VERBATIM_BLOCK_TYPES]


def block_text(block: dict[str, Any]) -> str:
    """What a thinking or compaction block holds, redacted, for display ('' for redacted_thinking)."""
    kind = block.get("type")
    if kind == "thinking":
        return text(str(block.get("thinking", "")))
    if kind == "compaction":
        value = block.get("content", block.get("summary", ""))
        return text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))
    return ""


def shown_block(block: dict[str, Any]) -> dict[str, Any]:
    """A thinking or compaction block as a view shows it: its text redacted, without the signature or data only the API reads."""
    kind = block.get("type")
    if kind == "thinking":
        return {"type": kind, "thinking": block_text(block)}
    if kind == "compaction":
        return {"type": kind, "content": block_text(block)}
    return {"type": kind}


def shown_event(event: dict[str, Any]) -> dict[str, Any]:
    """An event as the JSON views give it (events API, stream, ``tail --json``): verbatim blocks redacted (``event`` if none)."""
    if not verbatim_blocks(event):
        return event
    content = [shown_block(b) if isinstance(b, dict) and b.get("type") in VERBATIM_BLOCK_TYPES else b for b in event["content"]]
    return {**event, "content": content}


# The combined pattern ------------------------------------------------------------------------------
_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False)


class _Redactor:
    """The rules and their gates, so a line with nothing secret-like costs two scans and no more.

    Each rule has trigger literals one of which occurs in every text it matches (``AKIA``, ``://``;
    for a held value, a piece of it).  Two literal-only regexes (one over the text as it is, one over
    it lower-cased) find the triggers; only the rules so triggered are then run, combined into one
    regex per set of rules (cached).  Rules without a trigger (shapes that start with a character
    class) run as their own regexes, whose first-character scan is cheap.
    """

    def __init__(self, values: Sequence[str], rules: Sequence[Rule]) -> None:
        literals = sorted({form for v in values for form in _json_forms(v)}, key=len, reverse=True)
        self.rules: list[Rule] = []
        if literals:
            pieces = tuple(dict.fromkeys(_rare_piece(v) for v in literals))
            self.rules.append((pieces, "|".join(re.escape(v) for v in literals), "whole"))
        self.rules += [r for r in rules if r[0]]
        exact: dict[str, list[int]] = {}
        folded: dict[str, list[int]] = {}
        for index, (triggers, _source, _mode) in enumerate(self.rules):
            for trigger in triggers:
                table = folded if trigger == trigger.lower() and trigger.isascii() else exact
                table.setdefault(trigger, []).append(index)
        self.gates = [(folded, _gate(folded), True), (exact, _gate(exact), False)]
        self.always = [
            (re.compile(secret_shapes.QUICK.get(source, source)), _combine((((), source, mode),)))
            for triggers, source, mode in rules
            if not triggers
        ]

    def triggered(self, body: str) -> tuple[int, ...]:
        """The rules one of whose triggers occurs in ``body``."""
        chosen: set[int] = set()
        for table, gate, fold in self.gates:
            if gate is None:
                continue
            if fold:
                text_ = body.lower()
            else:
                text_ = body
            m = gate.search(text_)
            while m is not None:
                at = m.start()
                for trigger, rules in table.items():
                    if text_.startswith(trigger, at):
                        chosen.update(rules)
                m = gate.search(text_, at + 1)
        return tuple(sorted(chosen))

    def sub(self, body: str, protected: Sequence[tuple[int, int]]) -> str:
        out = body
        chosen = self.triggered(body)
        if chosen:
            pattern, modes = _combine(tuple(self.rules[i] for i in chosen))
            out = pattern.sub(functools.partial(_replace, modes, body, protected), body)
        for quick, (pattern, modes) in self.always:
            if quick.search(out) is not None:
                spans = _spans_after(out, body, protected)
                out = pattern.sub(functools.partial(_replace, modes, out, spans), out)
        headless = secret_shapes.headless_keys(out)  # a private key whose BEGIN line was cut away (a clipped output's tail)
        if headless:
            out = _cut(out, headless, _spans_after(out, body, protected))
        return out if out != body else body


_RARE_FIRST = "QZXJKVqzjxBWYUPGFMCHDSLNOREIATkv+/=_-~.!$%&*()#@;,|^<>0123456789wyfgbpmcudlhrsniaote"


def _rare_piece(literal: str) -> str:
    """A piece of ``literal`` to look for first: up to 8 characters, starting at its rarest character."""
    window = literal[: max(1, len(literal) - 7)]
    at = min(range(len(window)), key=lambda i: _RARE_FIRST.find(window[i]) % (len(_RARE_FIRST) + 1))
    return literal[at : at + 8]


def _gate(table: dict[str, list[int]]) -> re.Pattern[str] | None:
    """A regex finding any of the literals: a trie of literal-first branches, so the search scans by a charset."""
    if not table:
        return None
    return re.compile(_trie(sorted(table)))


def _trie(words: Sequence[str]) -> str:
    groups: dict[str, list[str]] = {}
    for word in words:
        groups.setdefault(word[0], []).append(word[1:])
    branches = []
    for first, rests in groups.items():
        if "" in rests:  # a whole literal ends here (longer ones sharing it are checked after the hit)
            branches.append(re.escape(first))
        elif len(rests) == 1:
            branches.append(re.escape(first + rests[0]))
        else:
            branches.append(re.escape(first) + "(?:" + _trie(rests) + ")")
    return "|".join(branches)


@functools.lru_cache(maxsize=256)
def _combine(rules: tuple[Rule, ...]) -> tuple[re.Pattern[str], dict[int, tuple[str, int]]]:
    """One regex of the rules' alternatives (each wrapped in a group) and, per wrapper group, its mode and inner groups."""
    alternatives, modes, number = [], {}, 1
    for _triggers, source, mode in rules:
        inner = re.compile(source).groups
        alternatives.append("(" + source + ")")
        modes[number] = (mode, inner)
        number += 1 + inner
    return re.compile("|".join(alternatives) or "(?!)"), modes


def _spans_after(out: str, body: str, protected: Sequence[tuple[int, int]]) -> Sequence[tuple[int, int]]:
    """Protected spans of ``body`` located again in ``out`` (the text between them may have changed length)."""
    if not protected or out is body:
        return protected
    return _spans(out, [body[a:b] for a, b in protected])


def _replace(modes: dict[int, tuple[str, int]], body: str, protected: Sequence[tuple[int, int]], m: re.Match[str]) -> str:
    wrapper = m.lastindex or 0
    while wrapper not in modes:  # lastindex is the outermost group that closed last: the wrapper
        wrapper -= 1
    mode, inner = modes[wrapper]
    start, end = m.span()
    if mode == "groups" and inner:
        spans = [m.span(g) for g in range(wrapper + 1, wrapper + 1 + inner) if m.start(g) >= 0 and m.end(g) > m.start(g)]
        # Nested groups: keep the outermost spans only.
        spans = [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)]
    else:
        spans = [(start, end)]
    pieces, at = [], start
    for a, b in sorted(spans):
        a, b = _escape_end(body, a), _escape_end(body, b)  # never cut a JSON escape
        if a >= b or a < at or any(a < pe and ps < b for ps, pe in protected):
            continue
        pieces += [body[at:a], REDACTED]
        at = b
    if not pieces:
        return m.group(0)
    return "".join(pieces) + body[at : max(at, end)]


def _cut(body: str, spans: Sequence[tuple[int, int]], protected: Sequence[tuple[int, int]]) -> str:
    """``body`` with each of ``spans`` (in order, not overlapping) replaced, as :func:`_replace` does a match's."""
    pieces, at = [], 0
    for a, b in spans:
        a, b = _escape_end(body, a), _escape_end(body, b)
        if a < b and a >= at and not any(a < pe and ps < b for ps, pe in protected):
            pieces += [body[at:a], REDACTED]
            at = b
    return "".join(pieces) + body[at:] if pieces else body


def _escape_end(body: str, i: int) -> int:
    """``i``, or the end of the JSON escape (``\\n``, ``\\u00e9``) that position ``i`` is strictly inside."""
    for j in range(i - 1, max(i - 6, -1), -1):
        if body[j] == "\\":
            k = j
            while k > 0 and body[k - 1] == "\\":
                k -= 1
            if (j - k) % 2:  # body[j] is the second half of an escaped backslash
                return i
            end = j + (6 if j + 1 < len(body) and body[j + 1] == "u" else 2)
            return end if end > i else i
    return i


def _spans(body: str, keep: Iterable[str]) -> list[tuple[int, int]]:
    spans, at = [], 0
    for fragment in keep:
        found = body.find(fragment, at)
        if found < 0:
            found = body.find(fragment)
            if found < 0:
                continue
        spans.append((found, found + len(fragment)))
        at = found + len(fragment)
    return spans


def _json_forms(value: str) -> list[str]:
    """How ``value`` can appear inside an encoded JSON line: escaped once, and twice (JSON inside a string)."""
    once = json.dumps(value, ensure_ascii=True)[1:-1]
    twice = json.dumps(once, ensure_ascii=True)[1:-1]
    return list(dict.fromkeys([once, twice]))


def _string(s: str, redactor: _Redactor) -> str:
    """One string with secrets replaced, redacted as it is encoded in a line; ``[REDACTED]`` whole if it cannot be cut cleanly (fail closed)."""
    encoded = _ENCODER.encode(s)
    out = redactor.sub(encoded, ())
    if out is encoded:
        return s
    try:
        back = json.loads(out)
    except ValueError:
        return REDACTED
    return back if isinstance(back, str) else REDACTED


def _by_string(body: str, redactor: _Redactor, keep: set[str]) -> str:
    """Fallback: redact each string of the JSON value on its own (keys too); a string that cannot be cut cleanly goes whole."""

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return _string(value, redactor)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            if keep and _ENCODER.encode(value) in keep:
                return value
            return {_string(k, redactor): walk(v) for k, v in value.items()}
        return value

    return _ENCODER.encode(walk(json.loads(body)))


@functools.lru_cache(maxsize=16)
def _redactor(values: tuple[str, ...]) -> _Redactor:
    return _Redactor(values, secret_shapes.rules())
