"""The command line's exit codes.

0 success; 1 bad data (a damaged or newer-schema log, a failed verify, a locked log, a confirmation refused);
2 a usage mistake (bad arguments, missing file, unknown session).
"""

from __future__ import annotations

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2
