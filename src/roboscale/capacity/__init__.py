"""Capacity models: how many nodes, at what rate and message size, one host sustains.

`data` loads trials from results folders, `models` fits the thesis's CSLV and our
two-resource model, `modelfile` stores a fit, `validate` scores it on held-out
configurations, `search` finds the boundary with few trials, `plots` draws it.
"""
