"""Tools: the ``@tool`` decorator (``decorator``), the built-in file and shell tools (``builtin``), clipping, images, MCP.

May import: ``stores``, ``state``, ``record`` and the leaves.
"""
