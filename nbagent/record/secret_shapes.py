"""The shapes of secrets, as regex rules for nbagent.record.redact: detect-secrets' key-shaped patterns and the ones it lacks.

Each rule is (trigger literals, regex source, mode): the regexes run on an encoded JSON line, so a
match never cuts a JSON escape in half; "whole" replaces the match, "groups" only its capture
groups (the secret part, keeping a keyword, scheme or user around it).
"""

from __future__ import annotations

import functools
import re

Rule = tuple[tuple[str, ...], str, str]  # (trigger literals, or () for always; regex source; mode)

# Inside an encoded JSON line: one character of a string (an escape counts as one), and an optional quote.
_STR_CHAR = r'(?:[^"\\]|\\.)'
_QUOTE = r'(?:\\?["\'])?'
# Not preceded by a key-alphabet character, or preceded by a \n, \r or \t escape.
_START = r"(?:(?<![A-Za-z0-9_\-])|(?<=\\[nrt]))"

# detect-secrets plugins used: (module, class, regex indices or None for all, how to redact, trigger literals).
# "whole": the match is the secret; "groups": its capture groups are the secret parts.  Triggers:
# literals one of which occurs in whatever the regexes match (see _Redactor; all lower case: looked
# for in the lower-cased text; with an upper-case letter: looked for as they are), chosen to start
# with a character that is rare in prose; () means the regexes always run.
_PLUGINS: tuple[tuple[str, str, tuple[int, ...] | None, str, tuple[str, ...]], ...] = (
    # AKIA/ASIA/... ids (whole); a 40-char secret in quotes after aws + a keyword (its group)
    ("aws", "AWSKeyDetector", None, "groups", ("A3T", "ABIA", "ACCA", "AKIA", "ASIA", "aws")),
    # their groups are the ghp/glpat prefixes, not the secret: redact whole matches
    ("github_token", "GitHubTokenDetector", None, "whole", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (
        "gitlab_token",
        "GitLabTokenDetector",
        None,
        "whole",
        ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-"),
    ),
    ("jwt", "JwtTokenDetector", None, "whole", ("yJ",)),
    ("slack", "SlackDetector", None, "whole", ("xox", ".slack.com")),
    ("stripe", "StripeDetector", None, "whole", ("k_live_",)),
    ("openai", "OpenAIDetector", None, "whole", ("k-",)),
    ("twilio", "TwilioKeyDetector", None, "whole", ("AC", "SK")),
    ("sendgrid", "SendGridDetector", None, "whole", ("SG.",)),
    ("pypi_token", "PypiTokenDetector", None, "whole", ("pypi-",)),
    ("discord", "DiscordBotTokenDetector", None, "whole", ()),
    ("telegram_token", "TelegramBotTokenDetector", None, "whole", ()),
    ("mailchimp", "MailchimpDetector", None, "whole", ("-us",)),
    ("square_oauth", "SquareOAuthDetector", None, "whole", ("q0csp-",)),
    ("basic_auth", "BasicAuthDetector", None, "groups", ("://",)),  # the password between user: and @
    ("azure_storage_key", "AzureStorageKeyDetector", None, "groups", ("AccountKey=",)),  # keeps AccountKey= (see _adapt)
    ("artifactory", "ArtifactoryDetector", (0,), "groups", ("AKC",)),  # AKC tokens; its AP... "password" shape is too loose
)
_PRIVATE_KEY_PLUGIN = ("private_key", "PrivateKeyDetector")  # its header list builds the whole-block pattern

# Private keys.  A line break written in any depth of escaping: \n (a real one), \\n (a repr(), JSON text), \\\\n ...
# A line number may stand before the material (read_file, cat -n, grep -n with or without a file name):
# "   2\tMIIE...", "2:MIIE...", "key.pem:2:MIIE..."; an arrow some viewers print is \u2192 in an encoded line.
_LINE_NUMBER = r"(?:(?:[\w./-]{1,200}:)?\d{1,9}(?:\t|\\+t|:|-|\|| ?(?:\u2192|\\+u2192)) ?)?"
_GAP = r"(?:\s|\\+[nrt])*" + _LINE_NUMBER
# The same read backwards (headless_keys runs on the reversed line): a line number, indentation, line breaks.
_LINE_BACK = r"(?: ?(?:\t|t\\+|:|-|\||(?:\u2192|2912u\\+) ?)\d{1,9}(?::[\w./-]{1,200})?)?(?: |t\\+)*(?:n\\+(?:r\\+)?)+"
_B64 = "[A-Za-z0-9+/=]"
# Where the first line of a key ends, read backwards: before anything but base64 or an escape, or before an escape.
_LINE_START_BACK = r"(?:(?![A-Za-z0-9+/=\\])|(?=[nrt]\\)|(?=[0-9a-fA-F]{4}u\\))"
_EXTRA_KINDS = ("ENCRYPTED PRIVATE KEY",)  # PKCS #8, encrypted: not among detect-secrets' headers
_FULL_LINE = re.compile(_B64 + "{16}")
_MAX_LINES = 400  # the lines of a headless key looked at (an 8192-bit RSA key has about 100)

# Shapes detect-secrets lacks (or has only loosely), tried before its patterns: (trigger literals, regex, how to redact).
_EXTRA: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("k-",), r"sk-ant-[A-Za-z0-9_\-]{16,}", "whole"),  # Anthropic (api, admin)
    (("k-",), _START + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}", "whole"),  # OpenAI-style
    (("_pat_",), r"github_pat_[A-Za-z0-9_]{22,}", "whole"),  # fine-grained GitHub
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[A-Za-z0-9]{30,}", "whole"),  # GitHub, any length
    (("AIza",), r"AIza[0-9A-Za-z_\-]{35}", "whole"),  # Google API key
    (("f_",), _START + r"hf_[A-Za-z0-9]{30,}", "whole"),  # Hugging Face
    (("pm_",), r"npm_[A-Za-z0-9]{36}", "whole"),  # npm (detect-secrets' own regex runs to the end of the line)
    (("_authtoken",), r":_authToken=\s*([^\s\"\\]{8,})", "groups"),  # .npmrc
    (("xox",), r"xox[abpr]-[A-Za-z0-9\-]{20,}", "whole"),  # Slack, looser than detect-secrets'
    (("k_live_", "k_test_"), r"[rs]k_(?:live|test)_[0-9a-zA-Z]{24,}", "whole"),  # Stripe, test keys too
    (("yJ",), r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", "whole"),  # a whole JWT, signature included
    # Bearer tokens: the token only (at least 16 characters, one of them a digit).
    (("bearer",), r"\b(?i:bearer)(?:\s|\\[nrt])+(?=[A-Za-z0-9._~+/\-]*[0-9])([A-Za-z0-9._~+/\-]{16,}=*)", "groups"),
    # AWS secret access keys, only right after their keyword (ini, env, JSON, Python).
    (
        ("access_key", "accesskey"),
        r"(?i:aws_?secret_?access_?key|secret_?access_?key)" + _QUOTE + r"\s*[:=]\s*" + _QUOTE + r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        "groups",
    ),
    (
        ("_session_token", "SessionToken", "SESSION_TOKEN"),
        r"(?i:aws_?session_?token|session_?token)" + _QUOTE + r"\s*[:=]\s*" + _QUOTE + r"([A-Za-z0-9/+]{100,}={0,2})",
        "groups",
    ),
    # Passwords in URLs, keeping scheme, user and host (the last @ before the path ends the password).
    (("://",), r"://[^\s/?#@:\"\\{}]*:([^\s/?#\"\\{}]+)@", "groups"),
)

# For the rules without a trigger: a cheaper regex that every match of theirs also matches (literal first).
QUICK = {
    r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}": r"\.[a-zA-Z\d_-]{6}\.",  # Discord
    r"\d{8,10}:[0-9A-Za-z_-]{35}": r":[0-9A-Za-z_-]{35}",  # Telegram
}


@functools.lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """Every shape as a rule: whole private key blocks, then the extras, then detect-secrets' regexes."""
    import importlib

    rules: list[Rule] = [(("private key", "putty-user-key-file"), _private_key_blocks(), "whole")]
    rules += _EXTRA
    for module, name, indices, mode, triggers in _PLUGINS:
        detector = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        for index, regex in enumerate(detector.denylist):
            if indices is None or index in indices:
                source, regex_mode = _adapt(module, regex, mode)
                rules.append((triggers, source, regex_mode))
    return tuple(rules)


def _adapt(module: str, regex: re.Pattern[str], mode: str) -> tuple[str, str]:
    """A detect-secrets regex as an inline-flagged source, with its secret part as a group where only that should go."""
    source = regex.pattern
    if regex.flags & re.VERBOSE:
        source = re.sub(r"\s+|#[^\n]*", "", source)  # none of the patterns used has an escaped space or '#'
    if module == "azure_storage_key" and source.startswith("AccountKey="):
        source = "AccountKey=(" + source[len("AccountKey=") :] + ")"
    if module == "artifactory" and "AKC" in source:
        source = re.sub(r"(AKC\[[^\]]*\]\{[^}]*\})", r"(\1)", source, count=1)
    if mode == "groups" and not re.compile(source).groups:
        mode = "whole"
    if regex.flags & re.IGNORECASE:
        source = "(?i:" + source + ")"
    return source, mode


def _private_key_blocks() -> str:
    """Whole private key blocks (PEM, OpenSSH, PGP, SSH2, PuTTY), from the headers detect-secrets looks for.

    The block runs to its END line, or to the end of the JSON string if that is missing (a cut-off
    key); a bare header with no key material after it (prose about keys) is left alone.  A line break
    may be written in any escaped form (``\\n`` in a ``repr()``, ``\\\\n`` in JSON text inside a
    string, ``\\r\\n``).  A key whose BEGIN line was cut away is :func:`headless_keys`'.
    """
    import importlib

    module, name = _PRIVATE_KEY_PLUGIN
    detector = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
    headers = [r.pattern for r in detector.denylist]
    kind = "(?:" + "|".join(re.escape(k) for k in _kinds()) + ")"
    begin = r"-{4,5} ?BEGIN " + kind + r" ?-{4,5}"
    end = r"-{4,5} ?END " + kind + r" ?-{4,5}"
    material = r"(?=" + _GAP + r"(?:[A-Za-z0-9+/=]{16}|[A-Za-z\-]+: ))"
    blocks = begin + material + _STR_CHAR + "*?(?:" + end + '|(?="|$))'
    putty = [re.escape(h) for h in headers if h.startswith("PuTTY")]
    if putty:
        blocks += "|(?:" + "|".join(putty) + r"):" + _STR_CHAR + r'*?(?:Private-MAC: ?[0-9a-fA-F]+|(?="|$))'
    return blocks


def _kinds() -> list[str]:
    """The kinds of private key (``RSA PRIVATE KEY``...), longest first: detect-secrets' headers and :data:`_EXTRA_KINDS`."""
    import importlib

    module, name = _PRIVATE_KEY_PLUGIN
    detector = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
    kinds = {r.pattern[len("BEGIN ") :] for r in detector.denylist if r.pattern.startswith("BEGIN ")}
    return sorted(kinds | set(_EXTRA_KINDS), key=len, reverse=True)


def headless_keys(body: str) -> list[tuple[int, int]]:
    """Spans of ``body`` (an encoded line) holding a private key whose BEGIN line was cut away: its lines and its END line.

    Found backwards, from the END line over the base64 lines before it (the first may be partial, the
    last short), so the cost is linear: a forward pattern would try every line of every base64 text.
    Lines that are all shorter than 16 characters are words before an END line in prose, not a key.
    """
    if "PRIVATE KEY" not in body:
        return []
    size = len(body)
    found = [m for m in _headless().finditer(body[::-1]) if _FULL_LINE.search(m.group())]
    return [(size - m.end(), size - m.start()) for m in reversed(found)]


@functools.lru_cache(maxsize=1)
def _headless() -> re.Pattern[str]:
    """The END line, reversed, and the key's lines before it, each reversed: for the reversed text."""
    kind = "(?:" + "|".join(re.escape(k[::-1]) for k in _kinds()) + ")"
    end = r"-{4,5} ?" + kind + r" DNE ?-{4,5}"
    short, full = _B64 + "{1,15}", _B64 + "{16,}"
    lines = _LINE_BACK + "(?:" + short + _LINE_BACK + ")?(?:" + full + _LINE_BACK + f"){{0,{_MAX_LINES}}}"
    return re.compile(end + lines + _B64 + "+" + _LINE_START_BACK)
