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
