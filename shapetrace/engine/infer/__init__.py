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

After the run, once: :mod:`.corrections` (names a later use proves for earlier tensors, the pins,
with :mod:`.backward`'s heads read back from products); where there are pins, :func:`.state.corrected`
walks the records again with them, answering every call they do not reach from the first walk's memos
(only what they reach is named afresh); then :mod:`.sequences` (which sequence queries the other).
The tracer hands the result to the rules as a frozen :class:`~shapetrace.engine.analysis.Analysis`.
"""

from shapetrace.engine.infer.state import Inference, corrected

__all__ = ["Inference", "corrected"]
