"""The impure engine: the session and its trust, the feed to subscribers, forks, the loop, tool calls, compaction, approval.

May import: ``model``, ``tools``, ``stores``, ``state``, ``record`` and the leaves; never IPython, ipywidgets or jupyter_server.
"""
