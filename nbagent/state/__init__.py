"""Pure rules over events: the fold, notes before a request, rewrites, context, the API's image limits, stops, tokens, prices, budgets, models.

May import: ``record`` and the leaves. No I/O beyond what a rule is handed; each rule has a table test.
"""
