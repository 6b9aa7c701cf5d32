"""The reliability campaign (issue 5): seeded crash, kill, lock and replay scenarios, and RELIABILITY.md.

``python -m reliability`` runs the full campaign and writes RELIABILITY.md;
``python -m reliability --quick`` runs a fast variant.  Every scenario module has
``run_<name>(quick: bool, seed: int) -> dict`` returning a table row.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The campaign uses the fake Messages API server of the test suite (tests/support/fake_anthropic.py).
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
