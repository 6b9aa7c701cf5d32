"""The Jupyter front end: ``%agent`` and its magics, the Agent settings, the live panel, the replay, the cells bridge.

May import: ``history``, ``render``, ``agent`` and every floor below, IPython, ipywidgets, ipykernel and comm; never
``server`` or ``cli``.
"""
