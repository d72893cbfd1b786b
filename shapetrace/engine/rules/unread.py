"""A tensor the model was given and never read (:mod:`..unread`): a note that leaves ``?``.

fairseq issue #318: the decoder layer is handed the encoder's padding mask and calls the encoder
attention without it; every op that ran is right, and the padded source frames are read all the same.
Nothing the run recorded is wrong, so this is no error: it is what the run could not check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.kinds import Kind

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def unread_inputs(analysis: Analysis) -> list[Diagnostic]:
    """One note for each tensor argument of the model that no op read."""
    return [Kind.INPUT_UNREAD.found(None, (
        f"the model was given `{a.name}` ({a.dtype} [{', '.join(map(str, a.shape))}]) and none of its ops read "
        "it: whatever it should have changed (a padding mask's hidden keys, positions) did not happen, and no "
        "check can see what was never used."),
        f"Pass `{a.name}` on to the op that needs it, or stop passing it.") for a in analysis.unread]


def bypassed_projections(analysis: Analysis) -> list[Diagnostic]:
    """A warning for each ``linear`` whose result reaches nothing the model returned while the tensor it
    projected was read elsewhere (ethen8181/machine-learning issue #13: ``linear_proj =
    self.linear_proj(output)`` computed and ``output`` returned): the layer's output is its projection's
    input, and the projection's weights reach nothing. A warning, not an error: the run cannot say the code
    meant to use it (a head computed for nothing is waste, not a wrong layout)."""
    rows = {e.index: e for e in analysis.events}
    out = []
    for index in analysis.bypassed:
        e = rows.get(index)
        if e is None:
            continue
        where = f"`{e.module}`: {e.code.strip()}" if e.module else e.code.strip()
        out.append(Kind.PROJECTION_BYPASSED.found(index, (
            f"{e.op} #{index} ({where}) computes a projection whose result reaches nothing the model "
            "returns (no op reads it, or what reads it is dropped), while the tensor it projects is read by "
            "another op: that tensor went on in the projection's place, and the projection's weights reach "
            "nothing."),
            "Use the projection's result (return it, or pass it on) where its input is used now."))
    return out
