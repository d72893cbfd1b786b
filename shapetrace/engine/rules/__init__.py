"""The diagnostic rules: each reads a frozen :class:`~shapetrace.engine.analysis.Analysis` (never the
recorder) and returns :class:`~shapetrace.engine.diagnostic.Diagnostic` findings.

:mod:`.diagnose` runs them all (``RULES``) in one order; the axis and product rules live there,
:mod:`.contracts` holds the attention kernels' contracts, :mod:`.masks` the masks, NaN rows, failed
views and the scale, :mod:`.joins` ``cat``, :mod:`.order` tokens in two orders, and :mod:`.writes`
finds the write behind a cache's name.
"""
