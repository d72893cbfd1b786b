"""Named-axis algebra: carry semantic axis names from op to op.

Pure Python (no torch, no Rich). An axis is a sequence of *atoms* in memory
order (major to minor). An atom is a piece of one *root* axis: the root name
(``"D"``), the root's full size, where the piece sits inside the root (its
stride in root elements) and its size. ``D`` split by ``view`` into 8 x 64
gives the atoms ``(D, stride 64, size 8)`` and ``(D, stride 1, size 64)``,
which the :class:`~.namer.Namer` labels ``H`` and ``d_k`` because ``D = H * d_k``.

Names therefore come from propagation, never from sizes alone: when T = H = 8,
a ``view`` that puts the token axis where the heads should be still labels it
``T``. Where an output axis cuts across atoms in a way no factorisation can
express (``[T=6, D=512]`` viewed as ``[8, 6, 64]``), it becomes one opaque
atom whose root starts with ``!`` and names everything it mixes.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shapetrace.engine.vocabulary import ROLES, TOKEN_ROLES, Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.namer import Namer

#: Canonical names whose axes index tokens or batch entries (see :mod:`.vocabulary`).
TOKEN_ROOTS = frozenset(n for n, r in ROLES.items() if r in TOKEN_ROLES)
UNKNOWN = "?"
MIXED_PREFIX = "!"
#: roots of atoms that count copies (``repeat``): they carry no meaning of their own
COPIES = "copies"


@dataclass(frozen=True)
class Atom:
    """A piece of one root axis: ``size`` values spaced ``stride`` apart inside it."""

    root: str
    root_size: int
    stride: int
    size: int

    @property
    def whole(self) -> bool:
        return self.stride == 1 and self.size == self.root_size


@dataclass(frozen=True)
class Axis:
    """One axis of a tensor: its atoms (major to minor) and an optional role.

    ``role`` is ``"query"`` or ``"key"`` for the two token axes of an
    attention-score tensor, so softmax can be checked against the key axis.
    """

    atoms: tuple[Atom, ...] = ()
    role: str | None = None
    size: int = field(init=False, compare=False, repr=False)
    _hash: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", math.prod(a.size for a in self.atoms))   # read on every op: computed once
        object.__setattr__(self, "_hash", hash((self.atoms, self.role)))      # axes key the tracer's name memo

    def __hash__(self) -> int:
        return self._hash

    def with_role(self, role: str | None) -> Axis:
        return Axis(self.atoms, role)


@functools.lru_cache(maxsize=4096)   # read for every projection's input: the same axes in every layer
def has_tokens(axis: Axis) -> bool:
    """Does any piece of this axis index tokens or batch entries?"""
    return _mix_has_tokens(coalesce(axis.atoms)) if axis.atoms else False


Piece = tuple[str, int, int]   # (root, stride in the root, size): one digit of a root's positions


def token_pieces(axis: Axis, namer: Namer) -> tuple[Atom, ...] | None:
    """The atoms of an axis made of tokens or batch entries only (named, not mixed), else None."""
    atoms = coalesce(axis.atoms)
    if not atoms or any(a.root == UNKNOWN or a.root == COPIES or a.root.startswith(MIXED_PREFIX)
                        or not namer.is_token_root(a.root) for a in atoms):
        return None
    return atoms


def cuts_of(*atom_lists: Sequence[Atom]) -> dict[str, set[int]]:
    cuts: dict[str, set[int]] = {}
    for atoms in atom_lists:
        for a in atoms:
            cuts.setdefault(a.root, set()).update((a.stride, a.stride * a.size))
    return cuts


def refine(atoms: Sequence[Atom], cuts: dict[str, set[int]]) -> tuple[Piece, ...] | None:
    """The atoms cut at every boundary in ``cuts`` (major first), so that two axes over the same roots
    can be compared piece by piece; None where the boundaries do not nest (no common digits)."""
    out: list[Piece] = []
    for a in atoms:
        edges = sorted(b for b in cuts.get(a.root, ()) if a.stride <= b <= a.stride * a.size)
        if any(hi % lo for lo, hi in zip(edges, edges[1:])):
            return None
        out.extend((a.root, lo, hi // lo) for lo, hi in reversed(list(zip(edges, edges[1:]))))
    return tuple(out)


def token_order(a: Axis, b: Axis, namer: Namer) -> tuple[tuple[Piece, ...], tuple[Piece, ...]] | None:
    """Two axes that hold the same tokens in different orders (row order against window order):
    both cut into common pieces, or None when they hold the same order, or not the same tokens."""
    if a is b or a.atoms == b.atoms or (len(a.atoms) < 2 and len(b.atoms) < 2):
        return None   # (two different single pieces never hold the same tokens)
    pa, pb = token_pieces(a, namer), token_pieces(b, namer)
    if pa is None or pb is None or pa == pb:
        return None
    cuts = cuts_of(pa, pb)
    ra, rb = refine(pa, cuts), refine(pb, cuts)
    if ra is None or rb is None or ra == rb or sorted(ra) != sorted(rb):
        return None
    return ra, rb


def order_clash(operands: Sequence[tuple[Sequence[Axis], Sequence[int]]], namer: Namer):
    """``(j, a, b, pieces of a, pieces of b)``: the first axis, from the right (as ``-j``), where a
    broadcast lines up operands ``a`` and ``b`` holding the same tokens in different orders; else None.
    ``operands``: each operand's ``(axes, shape)``."""
    n = max((len(shape) for _, shape in operands), default=0)
    for j in range(1, n + 1):
        lined = [(i, axes[-j]) for i, (axes, shape) in enumerate(operands)
                 if j <= len(shape) and shape[-j] > 1 and len(axes) == len(shape)]
        for (ia, a), (ib, b) in zip(lined, lined[1:]):
            found = token_order(a, b, namer)
            if found is not None:
                return j, ia, ib, found[0], found[1]
    return None


def in_root_order(axis: Axis) -> bool:
    """Does every root of this axis appear whole, in one piece (``N`` = Hp then Wp, not window order)?"""
    return all(a.whole for a in coalesce(axis.atoms))


def sliced(axis: Axis, size: int, namer: Namer, start: int | None = None) -> Axis:
    """A strict part of an axis: ``T[0:1]`` (a derived name, never the bare ``T``), or unnamed.

    The slice keeps what its axis indexes (a slice of tokens is tokens), not its declared size. A
    slice of a sum (``D+2*D_kv``) that starts and ends on its parts' bounds is those parts (``D``).
    """
    if size == axis.size:
        return axis
    label = namer.label(axis)
    if label is None or label.startswith(MIXED_PREFIX):
        return unknown_axis(size)
    stacked = "+" in label or _STACK.fullmatch(label)   # (``3*D``: three parts D, a fused q/k/v width)
    parts = _parts_between(label, start, size, namer, axis.size) if isinstance(start, int) and stacked else None
    if parts is not None:
        return root_axis("+".join(parts), size)
    if isinstance(start, int) and start >= 0 and size == 1 and start + 1 == axis.size:
        where = "-1:"   # the last one: a decode step's token (T[-1:]), whatever the length so far
    else:
        where = f"{start}:{start + size}" if isinstance(start, int) and start >= 0 else f":{size}"
    return Axis((Atom(indexed_label(label, where), size, 1, size),), axis.role)


_STACK = re.compile(r"\d+\*[A-Za-z_]\w*")


def indexed_label(label: str, where: str) -> str:
    """``T[0:3]``, ``T[ids_keep]``; a join taken whole, ``(1+T)[0:3]``, never read as ``1 + T[0:3]``."""
    return f"({label})[{where}]" if len(top_level_terms(label)) > 1 else f"{label}[{where}]"


_CUT = re.compile(r"(?P<base>.+)\[(?P<start>-?\d*):(?P<stop>-?\d*)\]")


def cut_from(label: str | None) -> tuple[str, int | None, int | None] | None:
    """The axis a range of positions was cut from, and the range, as :func:`indexed_label` wrote them:
    ``"T[2:5]"`` -> ``("T", 2, 5)``, ``"T[-1:]"`` -> ``("T", -1, None)``, ``"(1+T)[0:3]"`` -> ``("1+T", 0, 3)``
    (None for an open end); None for any other label (a whole axis, a pick ``T[ids_keep]``)."""
    m = _CUT.fullmatch(label) if label else None
    if m is None:
        return None
    base, where = m["base"], label[len(m["base"]) + 1:-1]
    if base.startswith("(") and base.endswith(")") and indexed_label(base[1:-1], where) == label:
        base = base[1:-1]
    if indexed_label(base, where) != label:
        return None
    return base, int(m["start"]) if m["start"] else None, int(m["stop"]) if m["stop"] else None


_PART = re.compile(r"\[(\d+):(\d+)\]")


def as_parallel_part(label: str) -> str:
    """``label`` with each slice that is one of equal parts of its axis (``[64:96]``: the third of the parts 32
    wide) written as any such part (``[·32]``): the parts of one axis cut into equal widths line up position
    by position, as ``split(D)``'s q, k and v do (CodeGen's ``torch.split(qkv_split, local_dim, dim=-1)``
    of a piece no factoring names: ``3*D%96[0:32]`` and ``3*D%96[64:96]``)."""
    def part(m: re.Match) -> str:
        start, stop = int(m.group(1)), int(m.group(2))
        width = stop - start
        return f"[·{width}]" if width > 0 and start % width == 0 else m.group(0)
    return _PART.sub(part, label)


_INDEXED_JOIN = re.compile(r"\((?P<join>.+)\)\[[^\]]*\]")


def indexed_join(label: str) -> str | None:
    """The join a label of :func:`indexed_label` cuts (``(T+S)[5:17]`` -> ``T+S``), or None."""
    m = _INDEXED_JOIN.fullmatch(label)
    return m.group("join") if m and _balanced(m.group("join")) else None


def _balanced(text: str) -> bool:
    """Do ``text``'s parentheses close in order (``T+1%3)*(T+1/3`` does not: two groups, not one)?"""
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


def top_level_terms(label: str, sign: str = "+") -> list[str]:
    """The terms of a join's label, split at the ``+`` signs outside brackets and parentheses:
    ``(1+T)[0:3]+4`` is ``["(1+T)[0:3]", "4"]`` (``sign="*"``: the factors of a product or a mix)."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(label):
        depth += (ch in "([") - (ch in ")]")
        if ch == sign and depth == 0:
            terms.append(label[start:i])
            start = i + 1
    return [*terms, label[start:]]


#: the width of a grouped-query q/k/v projection fused in one, queries first: ``(H + 2·H_kv)·d_k``
GROUPED_QKV = "D+2*D_kv"
#: the same where a head's width d_k is declared apart from D / H (Gemma's ``head_dim``): queries H·d_k wide
NARROW_GROUPED_QKV = "H*d_k+2*D_kv"
#: multi-query q/k/v fused in one where H_kv is not declared: H query heads, one key and one value head
#: (Falcon-7B's ``query_key_value``, GPT-BigCode's ``c_attn``), ``(H + 2)·d_k``; and with d_k apart from D / H
MQA_QKV, NARROW_MQA_QKV = "D+2*d_k", "H*d_k+2*d_k"
#: the fused widths of whole heads: a piece of one no factoring names (a block of q, k and v) is unnamed
FUSED_HEAD_ROOTS = frozenset({GROUPED_QKV, NARROW_GROUPED_QKV, MQA_QKV, NARROW_MQA_QKV})


#: an axis of q, k and v parts side by side, by its label: each part's size (a name, or a count of single
#: heads) and what it holds, in order. The heads axis of a fused width of whole heads (``H+2``: H query heads,
#: one key head, one value head), the fused width itself (``D+2*d_k``), and its key/value half cut at its
#: parts' bounds (``d_k+d_k``: GPT-BigCode's ``key_value``)
FUSED_PARTS = {
    "H+2": (("H", "query"), ("1", "key"), ("1", "value")),
    "H+2*H_kv": (("H", "query"), ("H_kv", "key"), ("H_kv", "value")),
    "n_rep+2": (("n_rep", "query"), ("1", "key"), ("1", "value")),
    **{f"{q}+2*{kv}": ((q, "query"), (kv, "key"), (kv, "value"))
       for q in ("D", "H*d_k") for kv in ("d_k", "D_kv")},
    **{f"{kv}+{kv}": ((kv, "key"), (kv, "value")) for kv in ("d_k", "D_kv")},
}


def _fused_head_decompositions(dims: dict[str, int]) -> dict[str, list[tuple[str, ...]]]:
    """How a fused q/k/v width of whole heads factors. Its features are heads of d_k side by side, so
    the width is (heads) × d_k, whose heads axis is itself a sum: H query heads, then the key heads, then
    the value heads (``H+2*H_kv``; Falcon-7B's ``view(B, T, H + 2, d_k)``). Falcon-40B's grouped layout
    keeps each group's n_rep query heads, key head and value head together: ``(H_kv, n_rep+2, d_k)``
    (with one key/value head the two layouts are one). A slice of such a heads axis at its parts'
    bounds is those parts (:func:`sliced`: ``[..., :-2, :]`` of ``H+2`` is ``H``)."""
    if "H" not in dims or "d_k" not in dims:
        return {}
    narrow = dims.get("D") != dims["H"] * dims["d_k"]
    kv_heads = dims.get("H_kv")
    if kv_heads is None:
        return {NARROW_MQA_QKV if narrow else MQA_QKV: [("H+2", "d_k")]}
    if kv_heads == dims["H"]:
        return {}
    found = [("H+2*H_kv", "d_k")]
    if kv_heads > 1 and "n_rep" in dims:
        found.append(("H_kv", "n_rep+2", "d_k"))
    return {NARROW_GROUPED_QKV if narrow else GROUPED_QKV: found}


def _parts_between(label: str, start: int, size: int, namer: Namer, total: int) -> list[str] | None:
    """The parts of the sum ``label`` that fill ``[start, start + size)`` exactly, a part ``k*X`` counted
    as k parts ``X`` (``D+2*D_kv`` at ``[64:80]`` is ``D_kv`` where D = 64, D_kv = 16; ``1+N[ids_keep]``
    of 5 at ``[1:5]`` is ``N[ids_keep]``: parts of unknown size, all of one name, share equally what the
    others leave of ``total``); None when the bounds fall inside a part or parts of two names have no size."""
    pieces: list[tuple[str, int | None]] = []
    for term in top_level_terms(label):
        count, _, name = term.rpartition("*") if "*" in term and term.split("*", 1)[0].isdigit() else ("1", "", term)
        if not count.isdigit():
            return None
        pieces += [(name, int(name) if name.isdigit() else namer.size_of(name) or _cut_width(name))] * int(count)
    unknown = [i for i, (_, width) in enumerate(pieces) if width is None]
    if len({pieces[i][0] for i in unknown}) > 1:
        return None   # (parts of one name are one size: BigBird's blocks T%2+T%2+T%2 share what is left)
    if unknown:
        left, count = total - sum(w for _, w in pieces if w is not None), len(unknown)
        if left % count:
            return None
        for i in unknown:
            pieces[i] = (pieces[i][0], left // count)
    found, at = [], 0
    for name, width in pieces:
        if start <= at and at + width <= start + size:
            found.append((name, width))
        elif at < start + size and start < at + width:
            return None   # the slice cuts this part
        at += width
    if not any(not name.isdigit() for name, _ in found) or sum(w for _, w in found) != size:
        return None   # (a counted part alone, the class token ``(1+N)[0:1]``, keeps the slice's name)
    return [name for name, _ in found]


def _cut_width(label: str) -> int | None:
    """The width of a range of positions cut from an axis (``F[128:192]``: 64, a projection's piece of a width of
    its own, :mod:`.infer.pieces`), or None."""
    cut = cut_from(label)
    return cut[2] - cut[1] if cut and cut[1] is not None and cut[2] is not None and 0 <= cut[1] < cut[2] else None


def piece_label(atom: Atom) -> str:
    """The label of an unnamed piece of a named root, one per piece: position ``i`` of the root
    is ``(i // stride) % size`` in it. The major piece is ``R/stride`` (which block: ``Hp/2``, the
    windows along Hp), the minor one ``R%size`` (where in its block: ``Hp%2``), one in between
    ``R/stride%size``. Two pieces of one size (Hp = 4 cut 2 x 2) never share a label."""
    if atom.stride * atom.size == atom.root_size:
        return f"{atom.root}/{atom.stride}"
    if atom.stride == 1:
        return f"{atom.root}%{atom.size}"
    return f"{atom.root}/{atom.stride}%{atom.size}"


def is_piece_label(label: str) -> bool:
    """Is ``label`` an unnamed piece of a root (``D/8``, ``Hp%2``), not a name of its own?"""
    return "/" in label or "%" in label


def _root_of_label(label: str) -> str:
    return re.split(r"[/%~]", label, maxsplit=1)[0]


def base_names(root: str) -> list[str]:
    """The declared names a root is made of: ``T[0:3]`` -> ``[T]``, ``S+T`` -> ``[S, T]``, ``(1+T)[0:3]``
    -> ``[1, T]``."""
    return [_root_of_label(part.split("[")[0].strip("()"))
            for part in root.lstrip(MIXED_PREFIX).replace("+", "*").split("*")]


def root_axis(name: str, size: int) -> Axis:
    """A whole named axis, e.g. ``root_axis("T", 6)``."""
    if size == 1:
        return Axis((Atom(name, 1, 1, 1),))
    return Axis((Atom(name, size, 1, size),))


@functools.lru_cache(maxsize=4096)
def unknown_axis(size: int) -> Axis:
    return Axis((Atom(UNKNOWN, size, 1, size),)) if size != 1 else Axis()


def unknown_axes(shape: Sequence[int]) -> tuple[Axis, ...]:
    """Unnamed axes for ``shape``: one tuple object per shape (the tracer's name memo keys axes by id)."""
    return _unknown_axes(tuple(shape))


@functools.lru_cache(maxsize=4096)
def _unknown_axes(shape: tuple[int, ...]) -> tuple[Axis, ...]:
    return tuple(unknown_axis(s) for s in shape)


def sizes_of(axes: Sequence[Axis]) -> tuple[int, ...]:
    return tuple(a.size for a in axes)



#: the roots a convolution gives its output's positions, by how many it slides over (1-, 2-, 3-D);
#: flattened in this order they are the tokens ``N`` (:func:`default_decompositions`)
GRID_ROOTS = {1: ("N",), 2: ("Hp", "Wp"), 3: ("Fp", "Hp", "Wp")}
#: the axes of a 2-d or 3-d patch grid (a convolution's output positions)
_PLANE_GRID = frozenset(GRID_ROOTS[2] + GRID_ROOTS[3])


def merges_neighbours(atoms: Sequence[Atom], namer: Namer) -> bool:
    """Whole features joined with the innermost pieces of the patch grid (``Wp%2·Hp%2·D``: which patch
    of each 2×2 block): Swin's patch merging and pixel unshuffle put the features of neighbouring
    patches side by side, and the blocks (``Hp/2``, ``Wp/2``) stay the grid. Not a mix of tokens. The same
    along one sequence (``T%P·D``: MEGABYTE's ``'b (k p) d -> b k (p d)'``, P neighbouring tokens' features
    side by side in one patch, the patches ``T/P`` in order); a piece that is not the innermost (``'b (p k)
    d'``, every K-th token) stays a mix."""
    grid = [a for a in atoms if a.root in _PLANE_GRID or namer.is_token_root(a.root)]
    rest = [a for a in atoms if a not in grid]
    return bool(grid) and bool(rest) and all(not a.whole and a.stride == 1 for a in grid) and \
        all(a.whole and namer.role(a.root) == Role.FEATURES for a in rest)


def patch_steps(axes: Sequence[Axis], i: int, namer: Namer) -> bool:
    """Is axis ``i`` the steps of each patch or window of the token axes, its patches on other axes of the same
    tensor: inner pieces of token roots only (never one whole, never a root's outermost piece), each root covered by
    the tensor's axes together? A projection over it is a patch embedding (PatchTST's ``W_P = Linear(patch_len,
    d_model)`` over ``[bs, nvars, patch_num, patch_len]``: ``T%P`` beside ``T/P``) or a pooling of each window's
    pixels (microsoft/Focal-Transformer's ``pool_method="fc"``, ``Linear(ws * ws, 1)`` over ``[B, nWh, nWw, C,
    ws·ws]``): it reads each patch's own steps, in order, as a conv stem reads its pixels; the patches stay the
    tokens. Proven by the atoms alone (which pieces of which root), never by sizes."""
    atoms = coalesce(axes[i].atoms) if 0 <= i < len(axes) else ()
    if not atoms or any(a.whole or not namer.is_token_root(a.root) for a in atoms):
        return False
    for root in {a.root for a in atoms}:
        pieces = [a for axis in axes for a in coalesce(axis.atoms) if a.root == root]
        if math.prod(a.size for a in pieces) != pieces[0].root_size or any(
                a.stride * a.size == a.root_size for a in atoms if a.root == root):
            return False
    return True


def _mix_has_tokens(atoms: Sequence[Atom], namer: Namer | None = None) -> bool:
    for a in atoms:
        for name in base_names(a.root):
            name = _root_of_label(name)
            if namer.is_token_root(name) if namer else name in TOKEN_ROOTS:
                return True
    return False


def default_decompositions(dims: dict[str, int]) -> dict[str, list[tuple[str, ...]]]:
    """How named sizes factor, every way real code lays them out.

    ``D = H·d_k``; a fused q/k/v projection ``3·D`` is ``qkv·D`` (nanoGPT: q, k, v side by side)
    or ``H·qkv·d_k`` (GPT-NeoX, Bloom: per head); ``2·D`` likewise with ``kv``; heads narrower
    than the model (T5's ``d_kv``, ``H·d_k ≠ D``) project to ``H*d_k``; ``H = H_kv·n_rep`` for GQA.
    """
    out: dict[str, list[tuple[str, ...]]] = {}
    if "D" in dims:
        out["3*D"] = [("qkv", "D")]
        out["2*D"] = [("kv", "D")]
    if "H" in dims and "d_k" in dims:
        inner = "D" if dims.get("D") == dims["H"] * dims["d_k"] else "H*d_k"
        out[inner] = [("H", "d_k")]
        out["3*d_k"] = [("qkv", "d_k")]
        out["2*d_k"] = [("kv", "d_k")]
        out["3*" + inner] = [*out.get("3*" + inner, [("qkv", inner)]), ("H", "3*d_k")]
        out["2*" + inner] = [*out.get("2*" + inner, [("kv", inner)]), ("H", "2*d_k")]
    if "H_kv" in dims and "d_k" in dims:
        out["D_kv"] = [("H_kv", "d_k")]
        out["2*D_kv"] = [("kv", "D_kv"), ("H_kv", "2*d_k")]
    if "H_kv" in dims and "n_rep" in dims:
        out["H"] = [("H_kv", "n_rep")]
    out.update(_fused_head_decompositions(dims))
    if "B" in dims and "nW" in dims:
        out["B*nW"] = [("B", "nW")]
    out.setdefault("N", [])   # a convolution's patch grid, flattened in order, is its tokens
    out["N"] += [GRID_ROOTS[2], GRID_ROOTS[3]]
    hp, wp = GRID_ROOTS[2]
    if "T" in dims and hp in dims and wp in dims and dims[hp] * dims[wp] == dims["T"]:
        out["T"] = [(hp, wp)]   # tokens declared as a grid of rows and columns (Swin's L = H·W)
    return out


def coalesce(atoms: Sequence[Atom]) -> tuple[Atom, ...]:
    """Merge neighbouring pieces of one root that sit next to each other in it. A piece of one entry is
    left out (a whole axis of one too, beside longer pieces: ``T·B`` at B = 1 holds the tokens alone)."""
    out: list[Atom] = []
    longer = any(atom.size > 1 for atom in atoms)
    for atom in atoms:
        if atom.size == 1 and (atom.root_size != 1 or longer):
            continue
        if out:
            prev = out[-1]
            if prev.root == atom.root and prev.stride == atom.stride * atom.size:
                out[-1] = Atom(atom.root, atom.root_size, atom.stride, prev.size * atom.size)
                continue
        out.append(atom)
    return tuple(out)


def reorders_one_root(atoms: Sequence[Atom]) -> bool:
    """Do ``atoms`` (coalesced) lay out every element of one root in another order than the root's own: pieces of
    it that cover it, an outer piece nearer in memory than an inner one? vit-pytorch's ``'b h n d -> b n (d h)'``
    merges the heads of ``D`` as ``d_k·H`` (strides 1, then 8), where the projection made them ``H·d_k``."""
    return len(atoms) > 1 and len({a.root for a in atoms}) == 1 and not atoms[0].whole \
        and math.prod(a.size for a in atoms) == atoms[0].root_size \
        and any(outer.stride < inner.stride for outer, inner in zip(atoms, atoms[1:]))


def lines_up_through_copies(x: Axis, y: Axis) -> bool:
    """Do two axes of one size pair the same entries, where a piece of copies (``repeat``'s or ``expand``'s copy
    index) pairs with any run of pieces of its size in the other? Copies hold one value each, so only the other
    pieces must line up: GCViT's global query ``repeat(1, nW, ...)`` to ``B·copies`` meets the windows' ``B·Hp/ws·
    Wp/ws`` (the same image for each window), while ``repeat(nW, 1, ...)``'s ``copies·B`` does not."""
    return _line_up(coalesce(x.atoms), coalesce(y.atoms))


def _line_up(xs: tuple[Atom, ...], ys: tuple[Atom, ...]) -> bool:
    if not xs or not ys:
        return not xs and not ys
    if ys[0].root == COPIES and xs[0].root != COPIES:
        xs, ys = ys, xs
    if xs[0].root != COPIES:
        return xs[0] == ys[0] and _line_up(xs[1:], ys[1:])
    run = 1
    for n, atom in enumerate(ys, 1):
        run *= atom.size
        if run == xs[0].size:
            return _line_up(xs[1:], ys[n:])
        if run > xs[0].size:
            return False
    return False
