"""The head split rule: features split into heads in an unusual but consistent order (a note), or sizes
given with ``--dims`` that the split the code makes contradicts (a note, once). A split is judged as
heads × d_k of the projection's own width, whatever its relation to D (Gemma's config.head_dim). And an einops
pattern that calls an axis heads while it holds pieces of the tokens (an error: the tokens were split)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import coalesce, reorders_one_root
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family
from shapetrace.engine.rules.feature_splits import feature_split, splits_as_given

if TYPE_CHECKING:
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.events import Event, TensorInfo


def head_split_order(analysis: Analysis) -> list[Diagnostic]:
    """Features split into heads in an unusual but consistent order (a note); or, where the split is
    neither H × d_k nor d_k × H of the sizes given, the sizes given that disagree with it (a note, once)."""
    out = []
    splits: dict[int, tuple[list, bool]] = {}   # id of a shared output info -> its odd labels, any error?
    H, dk = analysis.dims.get("H"), analysis.dims.get("d_k")
    # (where some reshape makes the cut given, another cut is the code's own finer one: no disagreement)
    disagreements: set[tuple | None] = {None} if splits_as_given(analysis, H, dk) else set()
    for e in analysis.events_of(Family.RESHAPE):
        if not e.outputs:
            continue
        o = e.outputs[0]
        if id(o) not in splits:   # (the same tensors in every layer: judged once; the analysis keeps o alive)
            splits[id(o)] = _odd_split(o, analysis.namer)
        odd, mixed = splits[id(o)]
        if None in odd:
            continue   # a split of axes with no name: nothing is known of what it spreads
        heads = {n: analysis.dims[n] for n in ("H", "H_kv") if analysis.dims.get(n)}
        if odd and not mixed and dk and _cut_at_head_width(o, dk, set(heads.values())):
            continue   # heads of d_k contiguous features of a projection's width, whatever its relation to D
        split = feature_split(o) if odd and not mixed and H and dk else None
        if split is not None and split[1:] != (dk, H):
            if split not in disagreements and None not in disagreements:
                disagreements.add(split)
                out.append(_dims_disagree(e, split, heads, dk))
            continue
        if odd and not mixed and any(reorders_one_root(coalesce(a.atoms)) for a in o.axes):
            out.append(_merged_out_of_order(e, o))
        elif odd and not mixed:
            std = f" rather than H={H} heads of d_k={dk} contiguous features" if H and dk else ""
            verb = "splits" if not e.inputs or len(o.shape) > len(e.inputs[0].shape) else "lays out"
            out.append(Kind.NONSTANDARD_HEAD_SPLIT.found(e.index, (
                f"{e.op} #{e.index} {verb} the features as {fmt_named(o.dims, o.shape)}{std}: each "
                f"head gets features spread across D (axes {', '.join(str(x) for x in odd)}). It is "
                "consistent, so a model trained this way works: the projections learn any fixed "
                "permutation of features. It does break loading weights trained with the usual split (H heads of "
                "d_k contiguous features)."),
                "To load them, split as view(B, T, H, d_k)."))
    if disagreements - {None}:   # the notes rest on the sizes given, which the code contradicts: not proven
        out = [d for d in out if d.kind != Kind.NONSTANDARD_HEAD_SPLIT.value]
    return out


def _merged_out_of_order(e: Event, o: TensorInfo) -> Diagnostic:
    """A merge that lays every feature of one root out in another order than the projection made it (heads
    merged as ``d_k·H``): the projection after it reads feature j of every head side by side."""
    axis = next(i for i, a in enumerate(o.axes) if reorders_one_root(coalesce(a.atoms)))
    label = o.dims[axis].replace("*", "·")
    return Kind.NONSTANDARD_HEAD_SPLIT.found(e.index, (
        f"{e.op} #{e.index} merges into {fmt_named(o.dims, o.shape)} with axis {axis} ({label}) in another "
        "order than the features were split: the next layer reads the same feature of every head side by side, "
        "not each head's features together. It is consistent, so a model trained this way works: the projections "
        "learn any fixed permutation of features. It does break loading weights trained with the usual split "
        "(H heads of d_k contiguous features)."),
        "Merge in the order of the split: transpose(1, 2), then reshape(B, T, H * d_k) (einops: 'b h n d -> b n "
        "(h d)').")


def _cut_at_head_width(o: TensorInfo, d_k: int, heads: set[int]) -> bool:
    """Is every piece of a feature axis in ``o`` cut at the width of a head given: a run of ``d_k``
    contiguous features (stride 1), or the count of those runs (stride ``d_k``, as many as ``H`` or
    ``H_kv``)? That is ``view(B, T, -1, head_dim)`` of a projection ``H·head_dim`` wide, whatever its relation
    to D (Gemma's config.head_dim); ``view(B, T, d_k, H)`` cuts elsewhere."""
    if any(reorders_one_root(coalesce(axis.atoms)) for axis in o.axes):
        return False   # (cut at the head's width, laid out in another order: d_k·H)
    pieces = [a for axis in o.axes for a in coalesce(axis.atoms) if not a.whole]
    return bool(pieces) and all(
        (a.stride == 1 and a.size == d_k) or (a.stride == d_k and a.size * d_k == a.root_size and a.size in heads)
        for a in pieces)


def _dims_disagree(e: Event, split: tuple[str, int, int], heads: dict[str, int], d_k: int) -> Diagnostic:
    """The heads given (``H``) against the ones a split of D makes: a question about the sizes given; where
    the split makes as many heads as ``H`` or ``H_kv``, the width of a head (d_k) is what disagrees (a
    config's head_dim set apart from D / H, as Gemma's)."""
    root, outer, inner = split
    H = heads["H"]
    agreeing = next((name for name, n in heads.items() if n == outer), None)
    if agreeing:
        return Kind.DIMS_DISAGREE.found(e.index, (
            f"--dims d_k={d_k}, but {e.op} #{e.index} splits {root}={outer * inner} into {agreeing}={outer} "
            f"heads of {inner}: "
            f"did you mean d_k={inner}? Names that come from d_k are not proven while the sizes disagree."),
            f"Give the sizes the code uses: --dims d_k={inner}, or leave d_k out where it is D / H.")
    return Kind.DIMS_DISAGREE.found(e.index, (
        f"--dims H={H}, but {e.op} #{e.index} splits {root}={outer * inner} into {outer} × {inner}: did you mean "
        f"H={outer}? Names that come from H are not proven while the sizes disagree."),
        f"Give the sizes the code uses: --dims H={outer} (d_k = {inner} follows).")


def _odd_split(o: TensorInfo, namer) -> tuple[list, bool]:
    """The labels of the axes that split features unusually, and whether any axis mixes tokens."""
    odd = [lab for axis, lab in zip(o.axes, o.dims) if namer.mix_kind(axis) == "note"]
    return odd, any(namer.mix_kind(a) == "error" for a in o.axes)


def pattern_contradictions(analysis: Analysis) -> list[Diagnostic]:
    """An einops pattern that calls an axis heads while it holds tokens: the tokens were split, not D."""
    out, rows = [], analysis.namer.size_of("Hp")
    for index, word in analysis.pattern_conflicts:
        e = analysis.events[index]
        o = e.outputs[0]
        if rows:   # (a grid declared: the letter may be the image's height, cut in another order than flattened)
            out.append(Kind.MIXED_AXIS.found(e.index, (
                f"{e.code or e.op} names an axis {word}, but in {fmt_named(o.dims, o.shape)} that axis holds "
                f"pieces of the tokens that are neither the heads (H={analysis.namer.size_of('H')}) nor the "
                f"declared grid's rows (Hp={rows}): the tokens were cut in another order than they were "
                "flattened in."), f"If {word} is the image's height, give the sizes in the order the tokens "
                                  f"were flattened ({word}=Hp rows of Wp); if it is the heads, split the "
                                  "features: 'b n (h d) -> b h n d'."))
            continue
        out.append(Kind.MIXED_AXIS.found(e.index, (
            f"{e.code or e.op} names an axis {word} (heads), but in {fmt_named(o.dims, o.shape)} that axis "
            "holds pieces of the tokens: the pattern split T, not the features. Each 'head' is a block of "
            "tokens and attention never crosses blocks."), "Split the features: 'b n (h d) -> b h n d'."))
    return out
