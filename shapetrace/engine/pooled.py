"""A dependency contract on a causal model's pooled output: it reads the input's last token.

Under a causal mask only the last token's output has seen the whole sequence, and every pooling of a causal
model's tokens (their mean, their maximum, the last token's output) reads that output; a pooled vector (an
output without a token axis) that does not change when an unpadded entry's last token moves is built only
from earlier tokens, none of which saw the end of the sequence (sentence-transformers PR #2111: a last-token
pool indexed by ``argmin(attention_mask) - 1`` clamped at 0 took the first token of every row without
padding).

It is measured in :mod:`.dependencies`' forward (batch entry 0 beside a copy of it whose last token moved),
only where a causal mask is declared and a padding mask among the call's companions proves that entry 0's
last token is a real one: a companion of two axes, the other as long as the input's tokens, holding two
values, its row 0 one value and some other row both (a row without padding beside a padded one). Without
such a mask nothing is claimed: the last position may be padding written into the token ids themselves
(CLIP's text tower pools at the end-of-text token, which padding follows). Plain data out.
"""

from __future__ import annotations

from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.kinds import Kind


def blind(probe, moved: list[list[bool]]) -> list[Diagnostic]:
    """The finding where ``probe``'s pooled output (``moved[0][0]``: did it change when entry 0's last token
    moved) ignored that token of an unpadded entry under a declared causal mask; else nothing."""
    if probe.out_tokens is not None or probe.causal is None or moved[0][0] or not entry_zero_unpadded(probe):
        return []
    return [Kind.POOLED_MISSES_LAST_TOKEN.found(None, (
        "measured on the values: the pooled output of batch 0, a sequence without padding, does not change when "
        f"its last input token changes, though the code declares a causal mask ({probe.causal}): only the last "
        "token's output has seen the whole sequence, and this pooling reads earlier tokens only (an index that "
        "picks the first token, a pooling over the wrong positions)."),
        "Pool the last real token: its index is the count of real tokens minus 1 (for a row without padding, "
        "the sequence's length minus 1), or mask a mean with the padding mask.")]


def entry_zero_unpadded(probe) -> bool:
    """Does a padding mask among ``probe``'s companions prove batch entry 0 has no padding (see the module)?"""
    length = probe.args[probe.position].shape[probe.tokens]
    for key, axis in probe.companions:
        mask = (probe.args if isinstance(key, int) else probe.kwargs)[key]
        if axis is None or mask.dim() != 2 or mask.shape[1 - axis] != length or mask.is_meta:
            continue
        rows = [row.unique().numel() for row in mask.movedim(axis, 0)]
        if mask.unique().numel() == 2 and rows[0] == 1 and 2 in rows[1:]:
            return True
    return False
