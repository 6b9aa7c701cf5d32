"""The one error mapping of the magics: nbagent's errors become a ``UsageError`` that says what to do."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring
from traitlets import TraitError

from ..errors import LogCorruptError, LogLockedError, LogVersionError, ModelError, NbagentError, RefusedRequestError

Hints = tuple[tuple[type[Exception] | tuple[type[Exception], ...], str], ...]
# What the user can do about an error, by its type (the first that matches); other errors get the caller's hint.
HINTS: Hints = (
    (LogLockedError, "(`%agent --new ...` starts a separate session.)"),
    ((LogCorruptError, LogVersionError), "Start a new session with `%agent --new ...`; nothing was deleted."),
    (RefusedRequestError, ""),  # its message says what to do: a retry would be refused the same way
    (ModelError, "The session is saved; run %agent again to retry."),
)
_DEFAULTS: dict[Any, Any] = {}  # a magic's function: its options' defaults (an argparse Namespace)
WRITABLE = "Choose a writable folder with `%config Agent.log_dir = '/some/writable/folder'`."


@contextmanager
def usage_errors(hint: str = "", *, hints: Hints = HINTS, oserror: str = "") -> Iterator[None]:
    """Turn nbagent's errors into a ``UsageError`` that says what to do; an ``OSError`` too, given its message.

    ``oserror`` may name the OS's reason as ``{reason}``; without it an ``OSError`` passes through.
    """
    try:
        yield
    except NbagentError as err:
        extra = next((text for types, text in hints if isinstance(err, types)), hint)
        raise UsageError(f"{err} {extra}".strip()) from None
    except TraitError as err:  # Agent settings that do not fit together (each is checked when it is set)
        raise UsageError(f"{err} Change it with `%config Agent.<name> = ...`.") from None
    except OSError as err:
        if not oserror:
            raise
        raise UsageError(oserror.replace("{reason}", str(err.strerror or err))) from None  # not format(): a path may hold braces


def parse_options(magic: Any, options: str, known: Sequence[str]) -> Any:
    """A magic's ``options`` parsed by its argparse parser; an unknown option is a UsageError naming the nearest of ``known``.

    No options (most cells) is the parser's defaults, parsed once per magic and copied (argparse costs about 0.1 ms a cell).
    """
    if not options.strip():
        function = getattr(magic, "__func__", magic)  # the parser is the function's, whichever instance it is bound to
        if function not in _DEFAULTS:
            _DEFAULTS[function] = parse_argstring(magic, "")
        return argparse.Namespace(
            **{name: list(value) if isinstance(value, list) else value for name, value in vars(_DEFAULTS[function]).items()}
        )
    try:
        return parse_argstring(magic, options)
    except UsageError as err:
        raise UsageError(unknown_options(str(err), known)) from None


def unknown_options(message: str, known: Sequence[str]) -> str:
    """argparse's "unrecognized arguments: ..." said per option, with the nearest known option; other messages as they are."""
    prefix = "unrecognized arguments: "
    if not message.startswith(prefix):
        return message
    said = []
    for given in message[len(prefix) :].split():
        name = given.split("=", 1)[0]
        nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.6) if name.startswith("-") else []
        said.append(f"unrecognized option {given}: did you mean {nearest[0]}?" if nearest else f"unrecognized option {given}.")
    if not all(s.endswith("?") for s in said):
        said.append(f"The options are {', '.join(known)}.")
    return " ".join(said)
