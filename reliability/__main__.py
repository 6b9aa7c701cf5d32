"""``python -m reliability [--quick] [--seed N] [--only NAME] [--output PATH]``: run the campaign, write RELIABILITY.md.

The full campaign writes RELIABILITY.md at the repository root; ``--quick`` prints
the report instead unless ``--output`` is given.  Exit status 1 if any scenario failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .report import ROOT, passed, render, run_all


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios and write or print the report."""
    parser = argparse.ArgumentParser(prog="python -m reliability", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the fast variant (what the test suite runs)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every scenario (default 0)")
    parser.add_argument("--only", default="", help="run only scenarios whose module:name contains this")
    parser.add_argument("--output", type=Path, help="where to write the report (default: RELIABILITY.md for a full run)")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    rows = run_all(args.quick, args.seed, args.only, progress=lambda line: print(line, file=sys.stderr, flush=True))
    text = render(rows, quick=args.quick, seed=args.seed, elapsed=time.perf_counter() - began)
    output = args.output or (None if args.quick or args.only else ROOT / "RELIABILITY.md")
    if output is None:
        print(text)
    else:
        output.write_text(text)
        print(f"wrote {output}", file=sys.stderr)
    return 0 if passed(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
