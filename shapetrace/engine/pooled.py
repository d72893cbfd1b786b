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


def unmeasured_read(trace) -> list[Diagnostic]:
    """A note (the verdict ``?``) where a finished ``trace``'s first outermost call, under a declared causal
    mask, returns a tensor without a token axis (a pooled vector) from arguments that carry the tokens, one of
    them a mask (two axes, batch and tokens by name, integers or booleans), and :func:`blind` did not measure
    which token it reads (the dependency contracts not asked for, or the mask proving no entry 0 whole): which
    token the pooling picks is then a fact of the values (an index counted on the mask), and no name or shape
    decides it. One mechanism whichever entry point ran the trace: the CLI measures, the Python API measures
    only with ``dependencies=True``."""
    from shapetrace.engine.dependencies import _causal
    from shapetrace.engine.indices import node_labels

    first, probe = trace.capture.module_calls.first_call, trace.probe
    if first is None or first.output is None or (probe is not None and probe.out_tokens is None
                                                  and probe.causal is not None and entry_zero_unpadded(probe)):
        return []
    labels = node_labels(trace._inferred().axes, trace.namer)
    out = {trace.namer.role(label) for label in labels(first.output) if label}
    carry = [a for a in first.arguments if "tokens" in {trace.namer.role(label) for label in labels(a.node) if label}]
    masks = [a for a in carry if len(a.shape) == 2 and (a.dtype == "bool" or a.dtype.startswith(("int", "uint")))]
    causal = _causal(trace.events, trace._triangle)
    if causal is None or "tokens" in out or "batch" not in out or len(carry) < 2 or not masks:
        return []
    return [Kind.POOLED_READ_UNMEASURED.found(None, (
        f"not measured on the values: which token the pooled output reads. The code declares a causal mask "
        f"({causal}), so only the last real token's output has seen the whole sequence, and the index that picks "
        f"it comes from the values ({masks[0].name}'s count of real tokens, an argmin). It is measured where that "
        "mask has a row without padding beside a padded one (shapetrace trace, or shapetrace.trace(..., "
        "dependencies=True))."))]
