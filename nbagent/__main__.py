"""``python -m nbagent``: the ``nbagent`` command."""

import sys

from .cli import main

sys.exit(main())
