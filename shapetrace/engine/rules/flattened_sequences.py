"""Each sequence flattened into one vector for a fixed-length head: a readout, not a merge of heads.

Fixed-length models end by flattening every sequence, all of its tokens with all of the model's features,
into one vector that a linear layer reads (PatchTST's ``FlattenHead``: ``nn.Flatten(start_dim=-2)`` then
``nn.Linear(patch_num * d_model, target_window)``; IBM/TabFormer's row projection ``view(n, s * e)``, tests/
corpus/reports5/tabformer_seq_first.py). The axis it makes holds (token, feature) pairs, which
``tokens-merged-with-features`` warns of, and the linear reading it mixes tokens, which
``projection-over-tokens`` reports: both true of a merge of heads gone wrong, neither of a readout of a whole
sequence. What proves the readout, from the names' pieces and never from sizes: the axis is exactly one
token axis and the model's features (``T·D``), each whole (no slice, no stride: no heads cut out of it),
and every other axis of the tensor is the batch's (or of one entry, or a declared axis with no role: series
read out each on its own, PatchTST's ``[bs, nvars, d_model * patch_num]``). Heads merged with tokens (``T·d_k``,
``H·T``), pieces of axes, or a heads axis left beside it keep their findings. The same holds of a convolution's
whole map read out (:func:`grid_readout`: a CNN's ``flatten(1)`` before its classifier, timm's TNT projecting each
patch's inner map ``[B·N, Hp·Wp, C]`` into that patch's embedding ``[B, N, Hp·Wp·C]``).

Reads: the findings so far and the events they name. Adds nothing; drops those findings on such an axis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import GRID_ROOTS, MIXED_PREFIX, Axis, coalesce, has_tokens
from shapetrace.engine.kinds import Kind
from shapetrace.engine.vocabulary import GRID_AXES

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import TensorInfo


def flattened_sequences(analysis: Analysis, found: list[Diagnostic]) -> list[Diagnostic]:
    """``found`` less the merge findings on a flatten of whole sequences beside the batch, and the
    projection findings on a linear that reads one, or that mixes one whole token axis (:func:`mixes_whole_tokens`)."""
    return [d for d in found if not _readout(analysis, d)]


def _readout(analysis: Analysis, d: Diagnostic) -> bool:
    if d.event is None or d.kind not in (Kind.TOKENS_MERGED_WITH_FEATURES, Kind.PROJECTION_OVER_TOKENS):
        return False
    e = analysis.events[d.event]
    if d.kind == Kind.PROJECTION_OVER_TOKENS:
        last = len(e.inputs[0].shape) - 1 if e.inputs else -1
        return last >= 0 and (whole_sequence(e.inputs[0], last, analysis.namer)
                              or grid_readout(e.inputs[0], last, analysis.namer)
                              or mixes_whole_tokens(e.inputs[0], last, analysis))
    axis = next((i for side, i in d.blame if side == -1), None)
    if axis is None or not e.outputs:
        return False
    axis %= len(e.outputs[0].shape)
    return whole_sequence(e.outputs[0], axis, analysis.namer) or grid_readout(e.outputs[0], axis, analysis.namer)


def grid_readout(t: TensorInfo, i: int, namer) -> bool:
    """Is axis ``i`` of ``t`` one convolution's whole map: every axis of its grid of patches (``Hp, Wp`` or ``Fp, Hp,
    Wp``), each whole and side by side in order, joined with whole axes that are neither tokens, batch nor heads
    (its channels, features), no token axis left in the tensor's other axes? A linear reading it reads each map
    whole, as a CNN's classifier after ``flatten(1)`` does, or timm's TNT projecting each patch's inner map
    (``[B·N, Hp·Wp, C]`` reshaped to ``[B, N, Hp·Wp·C]``) into that patch's embedding: no token of one map meets
    another map's. Heads merged with the grid hold a piece of ``D`` (``Hp·Wp·d_k``, not whole), and a grid cut
    into pieces is not whole: both keep their findings. Proven by the atoms alone, never by sizes."""
    atoms = coalesce(t.axes[i].atoms) if i < len(t.axes) else ()
    grid = tuple(a.root for a in atoms if a.root in GRID_AXES)
    rest = [a for a in atoms if a.root not in GRID_AXES]
    if grid not in (GRID_ROOTS[2], GRID_ROOTS[3]) or not rest or len(rest) + len(grid) != len(atoms):
        return False
    first = next(k for k, a in enumerate(atoms) if a.root in GRID_AXES)
    if any(a.root not in GRID_AXES for a in atoms[first:first + len(grid)]):
        return False   # (the grid's axes apart, something between them)
    if not all(a.whole for a in atoms) or any(a.root.startswith(MIXED_PREFIX)
                                               or namer.plain_role(a.root) in _KEPT_APART for a in rest):
        return False
    return not any(namer.plain_role(a.root) == "tokens" or a.root.startswith(MIXED_PREFIX) and has_tokens(Axis((a,)))
                   for k, axis in enumerate(t.axes) if k != i for a in axis.atoms)


#: roles of whole axes that a map's readout never joins with its grid
_KEPT_APART = ("tokens", "batch", "heads", "head_features")


def whole_sequence(t: TensorInfo, i: int, namer) -> bool:
    """Is axis ``i`` of ``t`` all of one token axis with all of the model's features, beside batch axes alone?"""
    atoms = t.axes[i].atoms if i < len(t.axes) else ()
    roles = sorted(namer.plain_role(a.root) or "" for a in atoms)
    return roles == ["features", "tokens"] and all(a.size == a.root_size and a.stride == 1 for a in atoms) \
        and all(namer.plain_role(label) == "batch" or size == 1 or _series(label, namer)
                for k, (label, size) in enumerate(zip(t.dims, t.shape)) if k != i)


def _series(label: str | None, namer) -> bool:
    """A declared axis with no role (PatchTST's ``nvars``, declared ``V``): a set of series kept apart, each
    read out on its own, as entries of the batch are (heads, tokens and features keep the finding)."""
    return bool(label) and label in namer.dims and namer.plain_role(label) is None


def mixes_whole_tokens(t: TensorInfo, i: int, analysis: Analysis) -> bool:
    """Is axis ``i`` of ``t`` one whole token axis alone (no piece of it, nothing merged with it, in its own
    order), beside a named axis kept apart that is not the batch's, and not as long as the features' ``D``? A
    linear reading it mixes each row's tokens by design, as MLP-Mixer's token mixing over ``[B, D, T]``,
    iTransformer's ``Linear(seq_len, d_model)`` over each variate's series (``x.permute(0, 2, 1)``: ``[B, N, T]``)
    and DLinear do. Heads merged with tokens are pieces and keep their finding; so do tokens left beside the batch
    alone, the features reduced away first (gaasher/I-JEPA issue #15's pooling over each token's features, then a
    ``Linear(T, ...)``); and where the tokens are as long as ``D``, a ``Linear(D, ...)`` fed the tokens by a
    transpose too many reads the same shape: equal sizes decide nothing."""
    atoms = t.axes[i].atoms if i < len(t.axes) else ()
    if len(atoms) != 1:
        return False
    namer, a, features = analysis.namer, atoms[0], analysis.dims.get("D")
    rows = [label for k, (label, size) in enumerate(zip(t.dims, t.shape))
            if k != i and size > 1 and label and namer.plain_role(label) != "batch"]
    return namer.plain_role(a.root) == "tokens" and a.size == a.root_size and a.stride == 1 and bool(rows) \
        and features is not None and a.size != features
