"""``python -m nbagent``: the ``nbagent`` command."""

import sys

from .cli.main import main

sys.exit(main())
