"""The ``nbagent`` command (``main``) and its ``demo``, ``export``, ``fork`` and ``mcp`` commands.

May import: ``history``, ``render``, ``agent`` and everything below them; never ``notebook`` or ``server``.
"""
