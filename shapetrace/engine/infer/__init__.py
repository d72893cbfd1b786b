"""Inference: what a captured run means, in declared passes over its records.

:mod:`..capture` keeps what torch said about each call; these modules decide what it means, after
the run (or while it records, when a trace's events are read early). Each module is one pass, with
a docstring saying what it reads and what it adds; :class:`.state.Inference` holds what they add and
runs them over each record in this order (:mod:`.record`):

1. :mod:`.seeds` — names where a tensor enters, from the declared sizes;
2. :mod:`.names` — names forward through each op's name rule, checked against torch's shape;
   then :mod:`.elements` — element provenance: a call that moves data (indexing, ``gather``, ``cat``
   of a split, ``roll``...) replayed on coordinate tensors names what the rule left unnamed;
3. :mod:`.writes` — names a write proves for its target (a cache, a buffer filled in slices);
4. :mod:`.provenance` — which projection (q, k, v, a fused qkv) each tensor came from;
5. :mod:`.rows` — the :class:`~shapetrace.engine.events.Event` of each call with a row;
6. :mod:`.einops` — a pattern's names checked and given where provenance left them unnamed.

After the run, once, in order (:func:`.state.concluded`, the tracer's one call): the walk finished;
:mod:`.corrections` (names a later use proves for earlier tensors, the pins, with :mod:`.backward`'s
heads read back from products); a second walk with the pins only where one changes what a record
before it read (:func:`.state.corrected`: a write names its target from its own record on, so a static
cache first read by the write that names it is walked once), answering every call the pins do not
reach from the first walk's memos; then :mod:`.sequences` (which sequence queries the other).
The tracer hands the result to the rules as a frozen :class:`~shapetrace.engine.analysis.Analysis`.
"""

from shapetrace.engine.infer.state import Inference, concluded, corrected

__all__ = ["Inference", "concluded", "corrected"]
