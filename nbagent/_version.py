"""nbagent's version, in a leaf every floor may import (pyproject.toml reads it from here)."""

__version__ = "0.1.0"
