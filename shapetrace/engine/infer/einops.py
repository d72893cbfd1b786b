"""einops: a pattern's names checked and given where provenance left an axis unnamed.

Reads: the finished chain of one ``rearrange`` (its groups) and the event of its last call.
Adds: ``state.pattern_conflicts`` (an axis the pattern calls heads that holds tokens), and the
pattern's declared names on that event's output and ``state.axes``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import OpRecord
from shapetrace.engine.infer import sizes
from shapetrace.engine.infer.rows import info_like
from shapetrace.engine.vocabulary import GRID_AXES, Role, canonical

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def chained(state: Inference, record) -> bool:
    pending = state.pending_pattern
    return type(record) is OpRecord and record.einops is not None and record.einops[0] == pending[0] and \
        bool(record.ins) and record.ins[0] == pending[1]


def finish_pattern(state: Inference) -> None:
    """The pattern's output: an axis it calls heads that holds a piece of the tokens (not one whole axis, nor a piece
    the input side cut from one grid axis) is a contradiction (``'b (h n) d -> b h n d'``); an axis provenance left
    unnamed takes the pattern's name where that name is a declared one of the same size (``h`` -> ``H``)."""
    _, node, index, groups, opened, read = state.pending_pattern
    state.pending_pattern = None
    event = state.events[index] if index < len(state.events) else None
    if groups is None or event is None or not event.outputs or len(groups) != len(event.outputs[0].axes):
        return
    info = event.outputs[0]
    axes, either = list(info.axes), set()
    for i, (group, axis) in enumerate(zip(groups, info.axes)):
        if len(group) == 1 and canonical(group[0]) == "H" and any(
                state.namer.is_token_root(a.root) for a in axis.atoms) and not _whole_grid_axis(axis) and \
                not _cut_from_grid_axis(group[0], opened) and not _whole_axis(axis) and \
                not _after_features(state, info.axes[:i]):
            reading = _grid_piece(state, axis)
            if reading is None:
                state.pattern_conflicts.append((index, group[0]))
            elif reading == "either":
                axes[i] = ax.unknown_axis(axis.size)
                either.add(i)
    axes = tuple(axis if i in either or _heads_passed_through(group, opened) else
                 pattern_axis(state, group, _read_length_axis(state, group, axis, read, opened))
                 for i, (group, axis) in enumerate(zip(groups, axes)))
    if axes != info.axes:
        event.outputs[0] = info_like(info, axes, state.namer)
        state.rename(node, axes)


def _whole_grid_axis(axis: Axis) -> bool:
    """Is the axis exactly one whole declared grid axis (``Hp``)? Then the pattern's ``h`` is the image's height
    (latent diffusion's ``'b (h w) c -> b c h w'`` back to the feature map), not heads: no tokens were split."""
    return len(axis.atoms) == 1 and axis.atoms[0].whole and axis.atoms[0].root in GRID_AXES


def _cut_from_grid_axis(word: str, opened: tuple) -> bool:
    """Did the pattern's own input side cut ``word`` with other letters from one whole declared grid axis (BiFormer's
    regions ``'n (j h) (i w) c -> n (j i) h w c'`` over an NHWC map: ``h`` the rows within a region)? Then the
    letter is a piece of the image's height, never heads cut from the features (``'b (h n) d'`` cuts the tokens)."""
    left, axes = opened
    if left is None or len(left) != len(axes):
        return False
    return any(word in group and len(group) > 1 and _whole_grid_axis(axis) for group, axis in zip(left, axes))


def _after_features(state: Inference, before: tuple) -> bool:
    """With no grid declared, does a features axis come before the one the pattern calls ``h`` (FLatten's ``'b (w h)
    c -> b c w h'``: a window's tokens laid out channels first, as a depthwise conv reads a map)? Heads come before
    their features (``'b h n d'``); a map's rows after its channels. (A declared grid is judged by its own rows.)"""
    return state.namer.size_of("Hp") is None and any(
        state.namer.role(state.namer.label(a) or "?") in (Role.FEATURES, Role.HEAD_FEATURES) for a in before)


def _whole_axis(axis: Axis) -> bool:
    """Does the axis a pattern calls heads hold one whole axis (lucidrains' alphafold2 axial attention over a pair
    ``[B, T, T, D]``: ``'b h w d -> (b w) h d'``, then ``'(b w) h d -> b h w d'``: ``h`` the pair's rows, all of
    T)? No tokens were split into heads there (``'b (h n) d'`` cuts them; an axis holding a piece of the tokens,
    ``Fp/2``, cut so by an earlier reshape, still contradicts the letter)."""
    return len(axis.atoms) == 1 and axis.atoms[0].whole


def _heads_passed_through(group: list[str], opened: tuple) -> bool:
    """Does the pattern call an axis heads only by its letter, one it took in whole and unnamed (Latte's video
    ``'b f c h w -> (b f) c h w'``: ``h`` the latent's height)? Heads are made by cutting features (``'(h d)'``)
    or come named from provenance; an axis passed through whole is proven nothing by the letter, and its size
    equal to ``H`` decides no name."""
    left, axes = opened
    if len(group) != 1 or canonical(group[0]) != "H" or left is None or len(left) != len(axes):
        return False
    return any(g == group and all(a.root == ax.UNKNOWN for a in axis.atoms) for g, axis in zip(left, axes))


def _grid_piece(state: Inference, axis: Axis) -> str | None:
    """Is a piece of the tokens that a pattern calls ``h`` the image's height? ``"grid"`` where the tokens fold
    a declared grid and this piece is its height (CvT's ``'b (h w) c -> b c h w'`` after the class token is split
    off: the tokens ``N = Hp*Wp`` cut into ``Hp`` rows of ``Wp``); ``"either"`` where the heads are as many as
    the grid's rows (a split of the tokens into heads reads the same: equal sizes decide nothing, so the axis is
    left unnamed); None where the piece is no grid axis (``'b (h n) d -> b h n d'``: the tokens split)."""
    label = state.namer.label(axis)
    if label not in GRID_AXES:
        return None
    return "either" if state.namer.size_of("H") == axis.size else "grid"


def _read_length_axis(state: Inference, group: list[str], axis: Axis, read: tuple, opened: tuple) -> Axis:
    """An unnamed output axis whose letters' lengths the code passed as sizes read from axes (``repeat(g, 'b d -> b
    n d', n=x.shape[1])``: a copy per entry of that axis) is that axis, as an ``expand`` to a read size names it
    (:func:`.sizes.grown_axes`); a group of several letters (``'j -> 1 1 1 (n j)'``, open_flamingo's media mask)
    is the product of each letter's axis, a read length's or the input's whole axis of that letter. einops caches
    its recipe by value, so its own calls may be handed the int a former call read: the pattern's frame still has
    this call's. A literal length names nothing."""
    lengths = dict(read)
    partly = any(a.root == ax.UNKNOWN for a in axis.atoms)   # (a piece left unnamed: the read size's, by the cache)
    if not (sizes.unnamed_or_copies(axis) or partly) or not any(word in lengths for word in group):
        return axis
    parts = [sizes.read_axis(state, lengths[word]) if word in lengths else _input_axis(word, opened)
             for word in group]
    if None in parts or math.prod(part.size for part in parts) != axis.size:
        return axis
    found = parts[0] if len(parts) == 1 else Axis(tuple(atom for part in parts for atom in part.atoms))
    if partly and (len(found.atoms) != len(axis.atoms) or any(
            a.root != ax.UNKNOWN and a != b for a, b in zip(axis.atoms, found.atoms))):
        return axis   # (the pieces provenance named disagree with the pattern's: keep what was proven)
    return found


def _input_axis(word: str, opened: tuple) -> Axis | None:
    """The input's axis the pattern's left side names by ``word`` alone, where it is named; else None."""
    left, axes = opened
    if left is None or len(left) != len(axes):
        return None
    found = next((axis for group, axis in zip(left, axes) if group == [word]), None)
    return None if found is None or sizes.unnamed_or_copies(found) else found


def pattern_axis(state: Inference, group: list[str], axis: Axis) -> Axis:
    if not axis.atoms or any(a.root != ax.UNKNOWN for a in axis.atoms):
        return axis
    names = [canonical(w) for w in group if not w.isdigit()]
    sizes = [state.namer.size_of(n) for n in names]
    if not names or None in sizes or math.prod(sizes) != axis.size:
        return axis
    return ax.Axis(tuple(ax.Atom(n, s, 1, s) for n, s in zip(names, sizes) if s != 1))
