"""Widths: a projection's features named by their width alone keep the name only where a use proves it.

Reads: the finished walk (each record's operands, results and their axes; the namer's verdict on a
regrouped axis). Adds: nothing to the state; returns pins ``{node: axes}`` for :mod:`.corrections`.

``nn.Linear(D, p·p·c)`` where p·p·c happens to equal D (DiT's ``FinalLayer`` at hidden 16, patches of 2,
4 channels) has its output named D by its width: nothing else says so. ``unpatchify`` then splits those
features into (p, p, c) and interleaves each piece with the patch grid; read with the width's name, that
regroups tokens with a slice of the model's features (``✗ mixed-axis`` on correct code). Equal sizes
never decide a name, so a width's name that would make such a finding stands only where a use proves
it: the features meet other features before they are regrouped (a residual addition, a join), or the
regrouped tensor is read by attention (a product of two operands, a fused attention): the classic
``q.view(B, H, T, d_k)`` of a projection keeps its finding. Otherwise the features are unnamed, as a
projection to any other width is.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import torch

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.infer.elements import callable_of, placed_arguments
from shapetrace.engine.opspec import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference

#: ops that read a regrouped tensor as attention does: their use proves its names
_ATTENTION = (Family.PRODUCT, Family.FUSED_ATTENTION, Family.MODULE_ATTENTION)


def unproven_widths(state: Inference) -> dict[int, tuple[Axis, ...]]:
    """Pins that unname the features of each projection whose width alone named them and whose
    regrouping with tokens no use proves."""
    readers = record_readers(state)
    pins: dict[int, tuple[Axis, ...]] = {}
    for record in state.capture.records:
        if type(record) is not OpRecord or record.spec.family is not Family.PROJECTION or not record.outs:
            continue
        node = record.outs[0]
        axes = state.axes.get(node)
        if not axes or not _whole_feature(state, axes[-1]):
            continue
        root = axes[-1].atoms[0].root
        if root == ax.GROUPED_QKV and not _fused_proven(state, readers, node, root):
            other = state.namer.feature_root_for_size(axes[-1].size, fused=False)
            if not _regrouped_unproven(state, readers, node, root):   # (else unnamed below)
                width = ax.root_axis(other, axes[-1].size) if other else ax.unknown_axis(axes[-1].size)
                pins[node] = axes[:-1] + (width,)
                continue
        if _cut_off_its_parts(state, readers, node, root) or _regrouped_unproven(state, readers, node, root) \
                or (root == ax.NARROW_GROUPED_QKV and not _parts_split_into_heads(state, readers, node, root)) \
                or (root in _MULTI_QUERY and not _read_as_heads(state, readers, node)):
            pins[node] = axes[:-1] + (ax.unknown_axis(axes[-1].size),)
    return pins


def _fused_proven(state: Inference, readers: dict, node: int, root: str) -> bool:
    """Does a use prove the grouped-query reading ``D+2*D_kv`` of a width that has another (``2*D`` at
    H = 2·H_kv)? Its parts split into heads, or attention reading what it became. Lumina-Next's adaLN
    ``Linear(D, 2·D)``, cut by ``chunk(2)`` into a scale and a gate that no attention reads, is ``2*D``: its
    sizes adding up to D + 2·D_kv prove nothing of keys or values."""
    return _parts_split_into_heads(state, readers, node, root) or _read_by_attention(state, readers, node)


def widths_by_use(state: Inference) -> dict[int, tuple[Axis, ...]]:
    """Pins naming each projection whose width is both the model's D and the key/value heads' D_kv (Gemma's
    ``head_dim`` set apart from D / H, at H_kv·head_dim = D: :meth:`~..namer.Namer.width_clashes`) by its use:
    ``D_kv`` where a view cuts its features into heads of d_k that attention then reads (Gemma-2's
    ``k_proj(x).view(*input_shape, -1, head_dim)``), ``D`` where no use cuts its features at all (``o_proj``
    back to the model's width). A width cut another way keeps no name."""
    readers, pins = None, {}
    for record in state.capture.records:
        if type(record) is not OpRecord or record.spec.family is not Family.PROJECTION or not record.outs:
            continue
        node = record.outs[0]
        axes = state.axes.get(node)
        if not axes or state.namer.label(axes[-1]) is not None or not state.namer.width_clashes(axes[-1].size) \
                or not _reads_features(state, record):
            continue
        readers = readers if readers is not None else record_readers(state)
        cuts = [r for r in readers.get(node, ()) if _cuts_last_axis(state, node, r)]
        if not cuts:
            pins[node] = axes[:-1] + (ax.root_axis("D", axes[-1].size),)
        elif all(_into_heads(state, node, r) for r in cuts) and _read_by_attention(state, readers, node):
            pins[node] = axes[:-1] + (ax.root_axis("D_kv", axes[-1].size),)
    return pins


def _reads_features(state: Inference, record) -> bool:
    """Does the projection read named features (a name a projection's width may then be given)?"""
    source = state.axes.get(record.ins[0]) if record.ins else None
    label = state.namer.label(source[-1]) if source else None
    return label is not None and state.namer.role(label.lstrip(ax.MIXED_PREFIX)) == "features"


def _cuts_last_axis(state: Inference, node: int, record) -> bool:
    """Does ``record`` give the features of ``node`` another width (a view, a split, a slice of them)?"""
    width = state.capture.nodes[node].shape[-1]
    return any(tuple(state.capture.nodes[out].shape)[-1:] != (width,) for out in record.outs)


def _into_heads(state: Inference, node: int, record) -> bool:
    """Is ``record`` a view of ``node``'s features as (H_kv heads, d_k), the leading axes kept?"""
    shape = tuple(state.capture.nodes[node].shape)
    outs = [tuple(state.capture.nodes[out].shape) for out in record.outs]
    heads, width = state.namer.size_of("H_kv"), state.namer.size_of("d_k")
    return record.spec.family is Family.RESHAPE and outs == [shape[:-1] + (heads, width)]


def _read_by_attention(state: Inference, readers: dict, node: int, depth: int = 16) -> bool:
    """Does attention (a product of two tensors, a fused attention) read what ``node`` became, within
    ``depth`` ops of it and before another projection makes new features of it? (A key's rotation and its
    ``repeat_kv`` put ten ops between Gemma-2's ``k_proj`` and the scores.)"""
    frontier, seen = [node], {node}
    for _ in range(depth):
        later = []
        for tensor in frontier:
            for record in readers.get(tensor, ()):
                data = [n for n in record.ins if n not in state.from_parameters]
                if record.spec.family in _ATTENTION and len(data) > 1:
                    return True
                if record.spec.family is Family.PROJECTION:
                    continue
                later += [out for out in record.outs if out not in seen]
                seen.update(record.outs)
        frontier = later
    return False


def _cut_off_its_parts(state: Inference, readers: dict, node: int, root: str) -> bool:
    """Is a fused width named ``k*X`` by its size alone (``3*D``) cut by a use at a bound that is not
    one of its k parts'? gemma_pytorch's ``qkv.split([q_size, kv_size, kv_size])`` at head_dim 12,
    H = 4, H_kv = 2 cuts 96 = 3·32 at 48 and 72: the width is (4 + 2·2)·12, not three of D."""
    if "+" in root:   # a sum: a slice at its parts' bounds is named by them (axes.sliced); any other is off
        return any(atom.root.startswith(f"({root})[") for record in readers.get(node, ()) for out in record.outs
                   for axis in state.axes.get(out, ()) for atom in axis.atoms)
    count = root.split("*", 1)[0]
    if not count.isdigit() or int(count) < 2:
        return False
    part = state.namer.size_of(root.split("*", 1)[1])
    cut = re.compile(re.escape(state.namer.label(ax.root_axis(root, int(count) * part)) if part else root)
                     + r"\[(\d+):(\d+)\]")
    for record in readers.get(node, ()):
        for out in record.outs:
            for axis in state.axes.get(out, ()):
                for atom in axis.atoms:
                    bounds = cut.fullmatch(atom.root)
                    if part and bounds and any(int(b) % part for b in bounds.groups()):
                        return True
    return _piece_cut_off_its_parts(state, readers, node) or \
        bool(part) and _picked_off_its_parts(state, readers, node, part)


#: a piece of a width named ``k*X`` by a view (``2*d_k`` of ``2*D`` viewed as heads) cut at ``[a:b]``
_PIECE_CUT = re.compile(r"(\d+)\*(\w+)\[(\d+):(\d+)\]")


def _piece_cut_off_its_parts(state: Inference, readers: dict, node: int, depth: int = 4) -> bool:
    """Is a piece ``k*X`` that a view of ``node``'s features named (``2*d_k``: 2·D viewed as H heads) cut,
    within ``depth`` one-operand ops, at a bound that is not one of its k parts'? The Synthesizer's dense
    ``Linear(D, H·max_len)`` at max_len = 2·d_k, viewed ``(B, T, H, max_len)`` and cut ``[..., :T]``: the
    cut at T = 6 is no bound of two d_k = 8, so the width is no two of anything, only max_len."""
    frontier, seen = [node], {node}
    for _ in range(depth):
        later = []
        for tensor in frontier:
            for record in readers.get(tensor, ()):
                if len([n for n in record.ins if n not in state.from_parameters]) > 1:
                    continue
                for out in (o for o in record.outs if o not in seen):
                    seen.add(out)
                    later.append(out)
                    for atom in (a for axis in state.axes.get(out, ()) for a in axis.atoms):
                        bounds = _PIECE_CUT.fullmatch(atom.root)
                        part = state.namer.size_of(bounds.group(2)) if bounds else None
                        if part and int(bounds.group(1)) > 1 and any(int(b) % part for b in bounds.groups()[2:]):
                            return True
        frontier = later
    return False


def _picked_off_its_parts(state: Inference, readers: dict, node: int, part: int) -> bool:
    """Does a pick from a view of ``node``'s features take a run of them whose bounds fall inside a part of
    ``part`` features, where the view keeps no axis whose rows are whole parts? Falcon-7B's multi-query
    ``query_key_value`` at H = 2: its width (H + 2)·d_k is 2·D too, viewed ``(B, T, H + 2, d_k)``; the key
    head ``[..., [-2], :]`` is features 64 to 96 of 128, half of the second D: the width is no two D. Each
    pick is replayed on the features' own positions (:func:`~.elements.placed_arguments`), so only what
    the call takes decides, never the sizes; a pick of scattered features (GPT-NeoX's per-head q, k, v)
    is no run and proves nothing."""
    lead, width = tuple(state.capture.nodes[node].shape[:-1]), state.capture.nodes[node].shape[-1]
    for view in readers.get(node, ()):
        shape = tuple(state.capture.nodes[view.outs[0]].shape) if view.outs else ()
        if view.spec.family is not Family.RESHAPE or shape[:len(lead)] != lead or \
                math.prod(shape[len(lead):]) != width or part in _row_sizes(shape[len(lead):]):
            continue
        positions = torch.arange(width).expand(*lead, width).reshape(shape)   # (…, pieces of the width)
        for pick in readers.get(view.outs[0], ()):
            if any(_run_off_parts(taken, part) for taken in _picked(pick, positions)):
                return True
    return False


def _row_sizes(shape: tuple[int, ...]) -> set[int]:
    """The number of features in one step along each axis of a view of them (its row-major strides)."""
    return {math.prod(shape[i + 1:]) for i in range(len(shape))}


def _picked(record, positions: torch.Tensor) -> list[torch.Tensor]:
    """What ``record`` takes from ``positions`` (the view it read, each element its feature's position),
    replayed: nothing where it reads more than that one tensor or picks by index tensors."""
    fn = callable_of(record.spec.replay) if record.spec.family in (Family.SLICE, Family.SPLIT) else None
    placed = placed_arguments(record) if fn is not None else None
    if placed is None or placed[2] != [0] or len(record.ins) != 1 or tuple(positions.shape) != placed[0][0].shape:
        return []
    args = (positions, *placed[0][1:])
    try:
        with torch._C.DisableTorchFunction():   # (a replay is never recorded)
            result = fn(*args, **placed[1])
    except Exception:
        return []
    return [t for t in (result if isinstance(result, (list, tuple)) else [result]) if isinstance(t, torch.Tensor)]


def _run_off_parts(taken: torch.Tensor, part: int) -> bool:
    """Is ``taken`` one run of consecutive features, fewer than all, that starts or ends inside a part?"""
    found = taken.unique()
    if found.numel() == 0:
        return False
    low, high = int(found[0]), int(found[-1]) + 1
    return high - low == found.numel() and (low % part != 0 or high % part != 0)


def _parts_split_into_heads(state: Inference, readers: dict, node: int, root: str) -> bool:
    """Does a use cut the sum ``root`` at its parts' bounds and view a part as heads (``H`` of ``d_k``)?
    gemma_pytorch's ``qkv.split([q_size, kv_size, kv_size])`` then ``xq.view(B, -1, H, head_dim)``, with
    d_k declared apart from D / H: the width (H + 2·H_kv)·d_k is then no size coincidence."""
    parts = {t.rpartition("*")[2] if t.split("*", 1)[0].isdigit() else t for t in ax.top_level_terms(root)}
    heads = {"H", "H_kv"} & set(state.namer.dims)
    for record in readers.get(node, ()):
        for out in record.outs:
            if not any(a.atoms and a.atoms[0].root in parts for a in state.axes.get(out, ())):
                continue
            for later in readers.get(out, ()):
                if any(state.namer.label(a) in heads and a.atoms[0].root in parts
                       for o in later.outs for a in state.axes.get(o, ())):
                    return True
    return False


#: the multi-query width read where H_kv is not declared: (H + 2)·d_k, named by its size alone
_MULTI_QUERY = frozenset({ax.MQA_QKV, ax.NARROW_MQA_QKV})


def _read_as_heads(state: Inference, readers: dict, node: int, depth: int = 3) -> bool:
    """Is the projection ``node`` cut into heads of d_k with H of them named (the width's reading as H
    query heads and one key and one value head), within ``depth`` one-operand ops of it? Falcon-7B's
    ``view(B, T, H + 2, d_k)[..., :-2, :]`` and GPT-BigCode's ``split((D, 2·d_k))`` then
    ``reshape(B, T·H, d_k)`` are; an MLP of width 1.5·D at H = 4 is not."""
    frontier, seen = [node], {node}
    for _ in range(depth):
        later = []
        for tensor in frontier:
            for record in readers.get(tensor, ()):
                if len([n for n in record.ins if n not in state.from_parameters]) > 1:
                    continue
                for out in record.outs:
                    axes = state.axes.get(out, ())
                    if any(state.namer.atom_label(t) == "H" for a in axes for t in a.atoms) and \
                            any(state.namer.atom_label(t) == "d_k" for a in axes for t in a.atoms):
                        return True
                    if out not in seen:
                        seen.add(out)
                        later.append(out)
        frontier = later
    return False


def _whole_feature(state: Inference, axis: Axis) -> bool:
    atoms = axis.atoms
    return len(atoms) == 1 and atoms[0].whole and atoms[0].root not in (ax.UNKNOWN, ax.COPIES) \
        and not state.namer.is_token_root(atoms[0].root)


def record_makers(state: Inference) -> dict[int, Any]:
    """node -> the record that made it (the last call with a row that returned it without taking it in)."""
    made: dict[int, Any] = {}
    for record in state.capture.records:
        if getattr(record, "spec", None) is not None:
            for node in record.outs:
                if node not in record.ins:
                    made[node] = record
    return made


def record_readers(state: Inference) -> dict[int, list]:
    """node -> the records that read it, in order."""
    found: dict[int, list] = {}
    for record in state.capture.records:
        if type(record) is OpRecord or type(record) is PassRecord:
            for node in dict.fromkeys(record.ins):
                found.setdefault(node, []).append(record)
    return found


def _regrouped_unproven(state: Inference, readers: dict, start: int, root: str) -> bool:
    """Does a one-operand path from ``start`` regroup a piece of ``root`` with tokens, with no use
    before it that meets other features and no attention reading it after?"""
    regrouped = False
    stack, seen = [(start, False)], {start}
    while stack:
        node, after = stack.pop()
        for record in readers.get(node, ()):
            data = [n for n in record.ins if n not in state.from_parameters]
            if len(data) > 1:
                if not after or record.spec.family in _ATTENTION:
                    return False   # met other features before the regrouping, or attention reads it
                continue
            if record.spec.family in (Family.FUSED_ATTENTION, Family.MODULE_ATTENTION):
                return False
            for out in record.outs:
                mixed = after or _mixes_root(state, out, root)
                regrouped = regrouped or mixed
                if out not in seen:
                    seen.add(out)
                    stack.append((out, mixed))
    return regrouped


def _mixes_root(state: Inference, node: int, root: str) -> bool:
    return any(any(a.root == root for a in axis.atoms) and state.namer.mix_kind(axis) == "error"
               for axis in state.axes.get(node, ()))
