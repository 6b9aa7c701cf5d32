"""The rule that hides a value by the name it goes by: a variable, a dict key, an attribute or a column named like a secret.

``api_key``, ``DB_PASSWORD``, ``hf_token``, ``cfg["db_password"]``, ``conn.password``, ``users["api_token"]``: the
value under such a name is never shown to the model (its type and the name are); values of any name are still
redacted by their shape where they are shown (:mod:`nbagent.record.redact`).
"""

from __future__ import annotations

import functools
import re

SECRET_NAME = re.compile(
    r"api_?key|apikey|secret|passw|passphrase|pwd|token(?!iz)|credential|private_?key|access_?key|auth(?!or)|cookie|bearer|signing",
    re.IGNORECASE,
)
HIDDEN = "(value hidden)"
LABEL_PARTS = 8  # the parts of a tuple label (a MultiIndex column) checked


@functools.lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
    """Whether a name says it holds a secret (``api_key``, ``DB_PASSWORD``, ``hf_token``...)."""
    return SECRET_NAME.search(name) is not None


def secret_label(label: object) -> bool:
    """Whether a dict key, attribute or column label names a secret: a string that does, or a tuple with such a part."""
    if type(label) is str:
        return secret_name(label)
    if type(label) is tuple:  # exact tuple: a subclass's iteration would be user code
        return any(type(part) is str and secret_name(part) for part in label[:LABEL_PARTS])
    return False
