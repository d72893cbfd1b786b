"""What a reduction or a normalisation computes along an axis, read against that axis's role (issue 33
item 4).

A ``sum``, ``mean``, ``max``, ``norm``, ``logsumexp`` or ``F.normalize`` along the heads or the batch
of what attention computes per head mixes heads (or sequences) that attention keeps apart from the
head split to the merge. Which axes it runs along comes from its recorded ``dim``
(:func:`~shapetrace.engine.reductions.axes_along`) and their roles from the names, so equal sizes
decide nothing and an unnamed axis is not judged (the verdict then says it was not checked). What is
reduced decides the scope, read from the trace and not from variable names:

* **per-head values** (a tensor with a head-features axis, ``d_k``, that the op keeps): the heads'
  outputs summed or averaged into one instead of laid side by side, a head-wise ``F.normalize(q)``
  left at its default ``dim=1``. Per-head outputs already projected to the model width (``[B, H, T,
  D]``, summed over heads as the output projection does) are not per-head values, and are not judged;
* **attention scores or weights** (a tensor with a key axis): a finding only where the result then
  weighs values (a later product whose other operand holds features). ``nn.MultiheadAttention``'s
  ``average_attn_weights`` (a mean over heads of the weights it returns) and attention rollout (head
  averages multiplied together for display) weigh no values, so they stay silent. One that runs over the
  key axis too leaves no weights over the keys to share, only a scale (Nystromformer's Newton-Schulz
  start ``1 / torch.max(torch.sum(kernel, dim=-2))``, one number for the whole tensor): not judged here.

A reduction of anything else (a loss ``mean()`` over the batch, pooling over tokens after the
attention, an RMSNorm over features) is outside attention's per-head computation and not judged here.

An ``einsum`` sums over each letter it drops, so it is judged the same way: one that sums over a heads
or batch axis of an operand whose head features it keeps (linear attention's ``'...nd,...ne->...de'`` on
heads left beside the tokens: the keys' sum runs over the heads) mixes the heads' values; an output
projection per head (``'bhnd,hdD->bnD'``) sums the head features away with the heads, and is not judged.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import BROADCAST_FAMILIES, Family, contracts_by_subscripts, family_of
from shapetrace.engine.reductions import axes_along
from shapetrace.engine.rules.averaged_heads import averaged_heads
from shapetrace.engine.rules.channels import readers, sums_over

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event, TensorInfo

#: the roles no reduction inside attention runs along, and how a message says them
WRONG_ROLES = {"heads": "heads", "batch": "batch entries"}
#: roles of the axes that hold what a value carries (features of a token, or of one head)
VALUE_ROLES = frozenset({"features", "head_features"})
#: ops that weigh one operand by another: where scores or weights meet the values
WEIGHING = frozenset({Family.PRODUCT, Family.FUSED_ATTENTION})


def reduction_axis(analysis: Analysis) -> list[Diagnostic]:
    """A reduction along a named heads or batch axis of per-head values, or of scores that then weigh
    the values."""
    consumers = _consumers(analysis.events)
    out = []
    for e in analysis.events_of(Family.REDUCE):
        if not e.inputs or not e.outputs:
            continue
        t = e.inputs[0]
        along = axes_along(Family.REDUCE.value, e.params, len(t.shape)) or ()
        wrong = [(i, role) for i in along if t.shape[i] > 1 and (role := _role(analysis, t.dims[i])) in WRONG_ROLES]
        if not wrong:
            continue
        i, role = wrong[0]
        if _holds_values(analysis, t, along):
            averaged = averaged_heads(analysis, e, along, i) if role == "heads" else None
            out.append(averaged or _values_finding(e, t, i, role))
        elif any(a.role == "key" for a in t.axes):
            weighs = _weighs_values(analysis, e, consumers)
            if weighs is not None:
                scale = not any(a.role == "key" for k, a in enumerate(t.axes) if k not in along)
                out.append(_scores_finding(e, t, i, role, weighs, scale))
    return out


def contraction_axis(analysis: Analysis) -> list[Diagnostic]:
    """An ``einsum`` that sums over a named heads or batch axis of per-head values whose features it keeps."""
    out = []
    for e in analysis.events_of(Family.PRODUCT):
        parsed = e.params.get("subscripts")
        if not contracts_by_subscripts(e.spec) or not parsed or len(parsed["inputs"]) != len(e.inputs):
            continue
        found = _summed_values(analysis, parsed, e.inputs)
        if found is not None:
            t, i, role, scores = found
            out.append(_scores_summed_finding(e, t, i, role) if scores else _values_finding(e, t, i, role))
    return out


def _summed_values(analysis: Analysis, parsed: dict, operands) -> tuple[TensorInfo, int, str, bool] | None:
    """``(operand, axis, role, scores)`` of the first heads or batch axis an einsum sums over in an operand
    that keeps a head-features axis in the output, or (``scores``) contracts one with another operand while
    it sums this operand alone over the heads: the q·k product, which must sum over the head's features
    only (fkodom/grouped-query-attention-pytorch issue #5: ``"b g h n d, b h s d -> b h n s"`` summed the g
    query heads that share a key head). Heads both operands carry, contracted with the features, are a
    per-head output projection (``"bhnd,hdD->bnD"``)."""
    kept = parsed["output"]
    for term, t in zip(parsed["inputs"], operands):
        if len(term) != len(t.shape):
            continue
        features = [c for k, c in enumerate(term) if _role(analysis, t.dims[k]) == "head_features" and t.shape[k] > 1]
        kept_features = [c for c in features if c in kept]
        if not kept_features and not any(sum(c in other for other in parsed["inputs"]) > 1 for c in features):
            continue
        for k, c in enumerate(term):
            alone = sum(c in other for other in parsed["inputs"]) == 1   # (summed out of this operand alone)
            if c not in kept and _role(analysis, t.dims[k]) in WRONG_ROLES and t.shape[k] > 1 \
                    and (kept_features or alone):
                return t, k, _role(analysis, t.dims[k]), not kept_features
    return None


def _scores_summed_finding(e: Event, t: TensorInfo, i: int, role: str) -> Diagnostic:
    what = WRONG_ROLES[role]
    return Kind.REDUCTION_OVER_WRONG_AXIS.found(e.index, (
        f"{e.op} #{e.index} sums over axis {i} ({t.dims[i]}, the {what}) of {fmt_named(t.dims, t.shape)} "
        f"as it takes the dot products over the head features: the {t.shape[i]} {what}' scores are added into "
        f"one, so the {what} are no longer apart."),
        f"Keep the {what} in the output (\"b g h n d, b h s d -> b g h n s\"): each one's scores over its "
        "own features.")


def normalised_over_tokens(analysis: Analysis) -> list[Diagnostic]:
    """``F.normalize`` of per-head values (a ``d_k`` axis it keeps) along a named token axis: cosine
    attention (Swin v2, cosine-sim ViTs) normalises each token's vector over its own features. Not where the
    product that reads the result sums over those tokens: the vectors it compares are then rows over the
    tokens (cross-covariance attention, XCiT), and their cosine is taken over the tokens."""
    out = []
    if analysis.size_choices:
        return out   # (names from equal sizes alone: the axis may be the batch's as well)
    reading = readers(analysis.events)
    for e in analysis.events_of(Family.REDUCE):
        if e.spec.name != "normalize" or not e.inputs or not e.outputs:
            continue
        t = e.inputs[0]
        along = axes_along(Family.REDUCE.value, e.params, len(t.shape)) or ()
        tokens = [i for i in along if t.shape[i] > 1 and _role(analysis, t.dims[i]) == "tokens"]
        summed = sums_over(e, reading)
        features = [i for i in along if t.shape[i] > 1 and _role(analysis, t.dims[i]) in VALUE_ROLES]
        if features and not tokens and t.dims[features[0]] not in summed \
                and any(_role(analysis, lab) == "tokens" for lab in summed):
            i = features[0]
            out.append(Kind.NORMALISED_ACROSS_THE_PRODUCT.found(e.index, (
                f"{e.op} #{e.index} divides {fmt_named(t.dims, t.shape)} by its norm along axis {i} ({t.dims[i]}), "
                f"but the product that reads it sums over the tokens ({', '.join(sorted(summed))}): it compares "
                f"rows over the tokens, each of which is now scaled by a norm taken across the rows."),
                "Normalise along the axis the product sums over: here the tokens (XCiT: F.normalize(q, dim=-1) on "
                "[B, H, d_k, T])."))
        if tokens and _holds_values(analysis, t, along) and t.dims[tokens[0]] not in summed:
            i = tokens[0]
            out.append(Kind.NORMALISED_OVER_TOKENS.found(e.index, (
                f"{e.op} #{e.index} divides the per-head vectors {fmt_named(t.dims, t.shape)} by their norm along "
                f"axis {i} ({t.dims[i]}, the tokens): each feature is scaled over the {t.shape[i]} tokens, so no "
                "token's vector has length 1 and each depends on the other tokens."),
                "Normalise each token's vector over its own features: F.normalize(x, dim=-1)."))
    return out


def statistics_over_tokens(analysis: Analysis) -> list[Diagnostic]:
    """A hand-written norm whose statistic runs along the tokens (``x.pow(2).mean(1, keepdim=True)`` on ``[B, T,
    D]``, an RMSNorm's variance over the second axis) and comes back onto the same tokens through calls without
    a row (``x * rsqrt(variance + eps)``): each token's features are scaled by statistics of every token, the
    later ones included. (A mean over the tokens read as a summary, pooled or prepended, never comes back onto
    the tokens it was taken from.)"""
    out: list[Diagnostic] = []
    if analysis.size_choices:
        return out   # (names from equal sizes alone: the axis may be the batch's as well)
    flagged: dict[int, tuple[int, str]] = {}
    for e in analysis.events_of(Family.REDUCE):
        if not e.inputs:
            continue
        t = e.inputs[0]
        along = axes_along(Family.REDUCE.value, e.params, len(t.shape)) or ()
        tokens = [i for i in along if t.shape[i] > 1 and _role(analysis, t.dims[i]) == "tokens"]
        kept = [i for i in range(len(t.shape)) if i not in along and _role(analysis, t.dims[i]) in VALUE_ROLES]
        if tokens and (_one_statistic_per_sequence(analysis, t, along)
                       or (len(along) == 1 and kept and e.params.get("keepdim"))) \
                and not _weighted_sum(analysis, e, t.dims[tokens[0]]):
            flagged[e.index] = (tokens[0], t.dims[tokens[0]])
    said: set[int] = set()
    for e in analysis.events:
        back = _broadcast_back(analysis, e, flagged)
        for j, joined in enumerate(e.joined or [frozenset()] * len(e.inputs)):
            for r in sorted((joined | back) & flagged.keys() - said):
                i, label = flagged[r]
                if j < len(e.inputs) and label in e.inputs[j].dims:
                    said.add(r)
                    red = analysis.events[r]
                    t = red.inputs[0]
                    out.append(Kind.NORMALISED_OVER_TOKENS.found(r, (
                        f"{red.op} #{r} takes a statistic of {fmt_named(t.dims, t.shape)} along axis {i} ({label}, "
                        f"the tokens) and {e.op} #{e.index} reads it back on those tokens: each token's features "
                        f"are scaled by statistics of all {t.shape[i]} tokens, the later ones included."),
                        "Take a norm's statistic over each token's own features: .mean(-1, keepdim=True)."))
    return out


def _weighted_sum(analysis: Analysis, e: Event, label: str) -> bool:
    """Is reduction ``e`` along the tokens ``label`` a sum of softmax weights normalised along those same tokens
    times values (AFT-simple's ``(softmax(K, 1) * V).sum(1, keepdim=True)``, rish-16/aft-pytorch issue #1's
    fix): attention pooling, whose weights sum to 1 over the tokens by design, not a norm's statistic?"""
    if e.spec.name != "sum" or not e.joined:
        return False
    for index in e.joined[0]:
        w = analysis.events[index]
        if w.spec.family is Family.SOFTMAX and w.inputs:
            along = axes_along(Family.SOFTMAX.value, w.params, len(w.inputs[0].shape)) or ()
            if [w.inputs[0].dims[i] for i in along] == [label]:
                return True
    return False


def _broadcast_back(analysis: Analysis, e: Event, flagged: dict[int, tuple[int, str]]) -> set[int]:
    """The flagged statistics a row reads directly and spreads back over the very tensor they were taken from
    (``mu.expand_as(z)`` after ``mu = z.mean(1, keepdim=True)``: jadore801120/attention-is-all-you-need-pytorch
    PR #17's LayerNormalization), where that row's operands carry the tokens again. Only an op that lines its
    operands up position by position spreads a statistic back (broadcasting arithmetic, an expand): a join puts
    it beside them as entries of its own (CLIP's ``AttentionPool2d``: ``cat([x.mean(dim=0, keepdim=True), x])``,
    the positions' mean prepended as a summary token), and scales no token by it."""
    found: set[int] = set()
    if family_of(e.op) not in BROADCAST_FAMILIES | {Family.EXPAND}:
        return found
    for source in e.sources:
        if source is not None and source[0] in flagged:
            taken_from = analysis.events[source[0]].sources[:1]
            if taken_from[0] is not None and taken_from[0] in e.sources:
                found.add(source[0])
    return found


def pooled_over_padding(analysis: Analysis) -> list[Diagnostic]:
    """A ``mean`` over the tokens of hidden states ``[B, T, D]`` (each batch entry apart) where an earlier op
    hid keys along those tokens with a mask that varies along the batch (a padding mask, ``[B, 1, 1, T]``):
    the padded positions enter each sequence's average (jsboige/CoursIA issue #15045, ``h.mean(dim=1)``
    without the ``attention_mask``). A masked average (``(h * m).sum(1) / m.sum(1)``) takes no ``mean``."""
    out: list[Diagnostic] = []
    if analysis.size_choices:
        return out   # (names from equal sizes alone: the axis may be the batch's as well)
    padded = _padded_token_labels(analysis)
    for e in analysis.events_of(Family.REDUCE):
        if e.spec.name != "mean" or not e.inputs:
            continue
        t = e.inputs[0]
        along = axes_along(Family.REDUCE.value, e.params, len(t.shape)) or ()
        roles = {i: _role(analysis, t.dims[i]) for i in range(len(t.shape))}
        tokens = [i for i in along if t.shape[i] > 1 and roles[i] == "tokens"
                  and padded.get(t.dims[i], e.index) < e.index]
        kept = [roles[i] for i in range(len(t.shape)) if i not in along]
        if len(along) != 1 or not tokens or "batch" not in kept or not any(r in VALUE_ROLES for r in kept):
            continue
        label, mask = t.dims[tokens[0]], analysis.events[padded[t.dims[tokens[0]]]]
        out.append(Kind.POOLED_OVER_PADDING.found(e.index, (
            f"{e.op} #{e.index} averages {fmt_named(t.dims, t.shape)} over axis {tokens[0]} ({label}, the tokens), "
            f"whose padding {mask.op} #{mask.index} hides from the attention with a mask of one row per batch "
            "entry: the padded positions enter each sequence's average, so its pooled vector changes with the "
            "padding its batch needs."),
            "Average over the real tokens only: m = attention_mask.unsqueeze(-1).to(h.dtype); "
            "(h * m).sum(1) / m.sum(1).clamp(min=1e-9)."))
    return out


def _padded_token_labels(analysis: Analysis) -> dict[str, int]:
    """Token label -> the first op that hides keys along it with a mask that varies along a batch axis (a
    padding mask: the hiding operand names the batch, of more than one entry, and those tokens)."""
    found: dict[str, int] = {}
    for e in analysis.events:
        if not e.params.get("hides") or len(e.inputs) != 2:
            continue
        mask = e.inputs[1] if e.params.get("hides_side") == "other" else e.inputs[0]
        roles = [(label, _role(analysis, label), size) for label, size in zip(mask.dims, mask.shape)]
        if any(role == "batch" and size > 1 for _, role, size in roles):
            for label, role, size in roles:
                if role == "tokens" and size > 1:
                    found.setdefault(label, e.index)
    return found


def _one_statistic_per_sequence(analysis: Analysis, t: TensorInfo, along: tuple[int, ...]) -> bool:
    """Does a reduction of ``t`` along ``along`` run over its tokens and its features together, each batch
    entry apart (``torch.linalg.norm(x, dim=(1, 2))`` on ``[B, T, D]``): a layer norm's statistic taken over
    the whole sequence (bkitano/llama-from-scratch issue #4), kept beside the axes or squeezed and
    unsqueezed back alike? Every axis it runs along is named tokens or features; a batch axis is kept."""
    roles = [_role(analysis, t.dims[i]) for i in along if t.shape[i] > 1]
    kept_batch = any(_role(analysis, t.dims[i]) == "batch" for i in range(len(t.shape)) if i not in along)
    return kept_batch and "tokens" in roles and any(r in VALUE_ROLES for r in roles) \
        and all(r == "tokens" or r in VALUE_ROLES for r in roles)


def _role(analysis: Analysis, label: str | None) -> str | None:
    return analysis.namer.plain_role(label)


def _holds_values(analysis: Analysis, t: TensorInfo, along: tuple[int, ...]) -> bool:
    """Does ``t`` keep a head-features axis (``d_k``) the op does not reduce: per-head values?"""
    return any(_role(analysis, label) == "head_features" and size > 1
               for k, (label, size) in enumerate(zip(t.dims, t.shape)) if k not in along)


def _consumers(events) -> dict[int, list[tuple[Event, int]]]:
    """Event index -> ``(event, operand position)`` of each later row that reads one of its results (a
    reduction's also where it entered through calls without a row: ``Event.joined``)."""
    found: dict[int, list[tuple[Event, int]]] = {}
    for e in events:
        for position, source in enumerate(e.sources):
            if source is not None:
                found.setdefault(source[0], []).append((e, position))
        for position, reductions in enumerate(e.joined):
            for index in reductions:
                found.setdefault(index, []).append((e, position))
    return found


def _weighs_values(analysis: Analysis, start: Event, consumers) -> Event | None:
    """The first later product that reads what ``start`` made (directly or through other rows) and
    weighs an operand holding features with it: where reduced scores are used as attention weights."""
    seen, queue = {start.index}, deque([start.index])
    while queue:
        at = queue.popleft()
        for e, position in consumers.get(at, ()):
            if family_of(e.op) in WEIGHING and any(_holds_features(analysis, other)
                                                     for k, other in enumerate(e.inputs) if k != position):
                return e
            if family_of(e.op) is Family.REDUCE and position < len(e.joined) and at in e.joined[position] \
                    and at == start.index and _holds_features(analysis, e.inputs[position]):
                return e   # (the weights entered its operand by a ``*`` with the values: a sum of them weighed)
            if e.index not in seen:
                seen.add(e.index)
                queue.append(e.index)
    return None


def _holds_features(analysis: Analysis, t: TensorInfo) -> bool:
    return any(_role(analysis, label) in VALUE_ROLES and size > 1 for label, size in zip(t.dims, t.shape))


def _values_finding(e: Event, t: TensorInfo, i: int, role: str) -> Diagnostic:
    what = WRONG_ROLES[role]
    if role == "heads":
        fix = ("Merge the heads side by side instead: y.transpose(1, 2).reshape(B, T, H * d_k), then the output "
               "projection; normalise each head's vector over its own features (dim=-1).")
    else:
        fix = "Reduce or normalise along an axis of one sequence (each head's features: dim=-1)."
    return Kind.REDUCTION_OVER_WRONG_AXIS.found(e.index, (
        f"{e.op} #{e.index} runs along axis {i} ({t.dims[i]}, the {what}) of the per-head values "
        f"{fmt_named(t.dims, t.shape)}: each result mixes the {t.shape[i]} {what}' vectors, so the {what} are "
        "no longer apart."), fix)


def _scores_finding(e: Event, t: TensorInfo, i: int, role: str, weighs: Event, scale: bool) -> Diagnostic:
    what = WRONG_ROLES[role]
    shared = (f"the {t.shape[i]} {what} share one scale of their weights (it runs over the keys too): by design "
              "(a start for an iteration) or a slip, they are no longer apart") if scale else \
        f"the {t.shape[i]} {what} share one set of weights, so they are no longer apart"
    return Kind.REDUCTION_OVER_WRONG_AXIS.found(e.index, (
        f"{e.op} #{e.index} runs along axis {i} ({t.dims[i]}, the {what}) of the attention scores "
        f"{fmt_named(t.dims, t.shape)}, and {weighs.op} #{weighs.index} weighs the values with the result: "
        f"{shared}."), severity="note" if scale else None, fix=(
        "Keep the scores per head and per sequence until they weigh the values: normalise over the keys "
        "(dim=-1); average over the heads only for display, after the output is computed."))


def stabiliser_axis(analysis: Analysis) -> list[Diagnostic]:
    """A max of a softmax's own scores (the same row's result, the same shape) taken along another axis than the
    softmax's and combined into those scores by a call without a row (LayoutLMv3's ``cogview_attention`` with
    ``amax(dim=-2)``: a max over the queries where the softmax runs over the keys). A max along the softmax's axis
    is constant along it, so the softmax cancels it; one along another axis shifts each entry of the softmax's
    axis by its own amount, and the weights change. Read on positions of one tensor, for a softmax along the keys
    (the role the scores' product gave that axis): no name, no size decides."""
    out = []
    for e in analysis.events_of(Family.SOFTMAX):
        if not e.inputs or not e.joined or not e.sources or e.sources[0] is None:
            continue
        scores = e.inputs[0]
        along = axes_along(Family.SOFTMAX.value, e.params, len(scores.shape))
        if not along or scores.axes[along[0]].role != "key":
            continue   # (a softmax along another axis than the keys is the finding: :func:`.diagnose.softmax_axis`)
        for index in sorted(e.joined[0]):
            r = analysis.events[index]
            if not r.spec.maximum or not r.inputs or not r.sources or r.sources[0] != e.sources[0] \
                    or r.inputs[0].shape != scores.shape:
                continue
            over = axes_along(Family.REDUCE.value, r.params, len(scores.shape))
            if over and set(over).isdisjoint(along) and all(scores.shape[i] > 1 for i in over):
                out.append(_stabiliser_finding(e, r, over[0], along[0]))
    return out


def _stabiliser_finding(e: Event, r: Event, over: int, along: int) -> Diagnostic:
    scores = e.inputs[0]
    label = scores.dims[over] if scores.dims else None
    return Kind.STABILISER_WRONG_AXIS.found(r.index, (
        f"{r.op} #{r.index} takes the max of the scores {fmt_named(scores.dims, scores.shape)} along axis {over}"
        f"{f' ({label})' if label else ''}, and it is combined into them before {e.op} #{e.index} along axis "
        f"{along}: it differs along the softmax's axis, so the softmax does not cancel it as it cancels a max "
        f"along its own axis, and the weights change."),
        f"Take the max along the softmax's axis: .amax(dim={along - len(scores.shape)}, keepdim=True).")
