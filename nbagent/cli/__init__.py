"""The ``nbagent`` command (``main``) and its ``demo``, ``export``, ``fork``, ``mcp`` and ``trust`` commands.

May import: ``history``, ``render``, ``agent`` and everything below them; never ``notebook`` or ``server``.
"""
