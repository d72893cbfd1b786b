"""Named-axis algebra: carry semantic axis names from op to op.

Pure Python (no torch, no Rich). An axis is a sequence of *atoms* in memory
order (major to minor). An atom is a piece of one *root* axis: the root name
(``"D"``), the root's full size, where the piece sits inside the root (its
stride in root elements) and its size. ``D`` split by ``view`` into 8 x 64
gives the atoms ``(D, stride 64, size 8)`` and ``(D, stride 1, size 64)``,
which the :class:`Namer` labels ``H`` and ``d_k`` because ``D = H * d_k``.

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

from shapetrace.engine.layout import row_major
from shapetrace.engine.vocabulary import ROLES, STACK_FACTORS, TOKEN_ROLES, Role

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
    parts = _parts_between(label, start, size, namer) if isinstance(start, int) and "+" in label else None
    if parts is not None:
        return root_axis("+".join(parts), size)
    if isinstance(start, int) and start >= 0 and size == 1 and start + 1 == axis.size:
        where = "-1:"   # the last one: a decode step's token (T[-1:]), whatever the length so far
    else:
        where = f"{start}:{start + size}" if isinstance(start, int) and start >= 0 else f":{size}"
    return Axis((Atom(f"{label}[{where}]", size, 1, size),), axis.role)


#: the width of a grouped-query q/k/v projection fused in one, queries first: ``(H + 2·H_kv)·d_k``
GROUPED_QKV = "D+2*D_kv"


def _parts_between(label: str, start: int, size: int, namer: Namer) -> list[str] | None:
    """The parts of the sum ``label`` that fill ``[start, start + size)`` exactly, a part ``k*X`` counted
    as k parts ``X`` (``D+2*D_kv`` at ``[64:80]`` is ``D_kv`` where D = 64, D_kv = 16); None when the
    bounds fall inside a part or a part's size is unknown."""
    pieces: list[tuple[str, int]] = []
    for term in label.split("+"):
        count, _, name = term.rpartition("*") if "*" in term and term.split("*", 1)[0].isdigit() else ("1", "", term)
        width = namer.size_of(name)
        if width is None or not count.isdigit():
            return None
        pieces += [(name, width)] * int(count)
    found, at = [], 0
    for name, width in pieces:
        if start <= at and at + width <= start + size:
            found.append(name)
        elif at < start + size and start < at + width:
            return None   # the slice cuts this part
        at += width
    return found if found and sum(namer.size_of(n) for n in found) == size else None


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
    """The declared names a root is made of: ``T[0:3]`` -> ``[T]``, ``S+T`` -> ``[S, T]``."""
    return [_root_of_label(part.split("[")[0]) for part in root.lstrip(MIXED_PREFIX).replace("+", "*").split("*")]


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


_SEQUENCE_WORD = re.compile(r"(?<![A-Za-z0-9_])[ST](?![A-Za-z0-9_])")


@dataclass
class Namer:
    """Knows the named sizes of one model and turns atoms into labels.

    Args:
        dims: named sizes, e.g. ``{"B": 2, "T": 6, "D": 512, "H": 8, "d_k": 64}``.
            ``d_k`` is derived from ``D`` and ``H`` when missing, ``n_rep``
            from ``H`` and ``H_kv``.
    """

    dims: dict[str, int]
    decompositions: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    declared_roles: dict[str, str] = field(default_factory=dict)
    _sub_names: dict[str, dict[tuple[int, int], str]] = field(default_factory=dict, repr=False)
    #: root -> its (stride, size) pieces that two factorings name differently: shown unnamed
    _clashes: dict[str, set[tuple[int, int]]] = field(default_factory=dict, repr=False)
    #: root -> the name a later use proved for its clashed piece (:meth:`decide`)
    decided: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.dims = dict(self.dims)
        d = self.dims
        if "D" in d and "H" in d and "d_k" not in d and d["H"] and d["D"] % d["H"] == 0:
            d["d_k"] = d["D"] // d["H"]
        if "H" in d and "H_kv" in d and "n_rep" not in d and d["H_kv"] and d["H"] % d["H_kv"] == 0:
            d["n_rep"] = d["H"] // d["H_kv"]
        if not self.decompositions:
            self.decompositions = default_decompositions(d)
        # multi-query attention (one key/value head): D_kv is d_k itself and n_rep is H
        self.aliases = {"D_kv": "d_k", "n_rep": "H"} if d.get("H_kv") == 1 and "d_k" in d else {}
        for root in self.decompositions:
            self._sub_names[root] = self._merged_table(root)

    # -- roles ---------------------------------------------------------------
    def plain_role(self, label: str | None) -> str | None:
        """The role of a plain (not mixed, not unknown) axis name; None when it has none."""
        if not label or label.startswith(MIXED_PREFIX) or UNKNOWN in label:
            return None
        return self.role(label)

    def broadcast_clash(self, operands) -> tuple[int, int, int] | None:
        """``(j, a, b)``: the first axis, from the right (as ``-j``), where operands ``a`` and ``b`` of a
        broadcast both have more than one entry and names of different roles. ``operands``: each
        operand's ``(labels, shape)``. Only names with known roles count (never sizes)."""
        n = max((len(shape) for _, shape in operands), default=0)
        for j in range(1, n + 1):
            named = [(i, labels[-j]) for i, (labels, shape) in enumerate(operands)
                     if j <= len(shape) and shape[-j] > 1 and self.plain_role(labels[-j])]
            for (ia, la), (ib, lb) in zip(named, named[1:]):
                if self.role(la) != self.role(lb):
                    return j, ia, ib
        return None

    def role(self, root: str) -> str | None:
        """What a root indexes: batch, tokens, features, heads, head_features, copies, stack, or None."""
        if root == COPIES:
            return COPIES
        if root in STACK_FACTORS:
            return "stack"
        if root.startswith(MIXED_PREFIX) or root == UNKNOWN:
            return None
        known = self.declared_roles.get(root) or ROLES.get(root)
        if known:
            return known
        if root in self.decompositions:
            return self._joined_role([self.role(p) for p in self.decompositions[root][0]])
        parts = [n for n in base_names(root) if not n.isdigit()]
        if parts == [root]:
            return None   # a name with no declared role
        return self._joined_role([self.role(n) for n in parts])

    @staticmethod
    def _joined_role(roles: list[str | None]) -> str | None:
        """The role of a product: one shared role, or features for heads × head features (D = H·d_k)."""
        kept = {r for r in roles if r not in ("stack", COPIES)}
        if kept == {"heads", "head_features"} or kept == {"features", "heads"}:
            return "features"
        return kept.pop() if len(kept) == 1 else None

    def is_token_root(self, root: str) -> bool:
        return self.role(root) in TOKEN_ROLES

    # -- sizes -------------------------------------------------------------
    def size_of(self, name: str) -> int | None:
        if name in self.dims:
            return self.dims[name]
        if name in STACK_FACTORS:
            return STACK_FACTORS[name]
        for parts in self.decompositions.get(name, ()):
            if all(self.size_of(p) for p in parts):
                return math.prod(self.size_of(p) for p in parts)  # type: ignore[misc]
        return None

    def _merged_table(self, root: str) -> dict[tuple[int, int], str]:
        """Named pieces of ``root`` under every way it can factor; a piece two ways name differently
        (``H = 3`` against the 3 of ``qkv``) is left unnamed: it cannot be told apart."""
        merged: dict[tuple[int, int], str] = {}
        clashes: set[tuple[int, int]] = set()
        for parts in self.decompositions[root]:
            for key, name in self._leaf_table(parts).items():
                if merged.get(key, name) != name:
                    clashes.add(key)
                merged.setdefault(key, name)
        if clashes:
            self._clashes.setdefault(root, set()).update(clashes)
        return {k: v for k, v in merged.items() if k not in clashes}

    def _leaf_table(self, parts: tuple[str, ...]) -> dict[tuple[int, int], str]:
        """(stride, size) -> name for every named piece of a root, recursively."""
        table: dict[tuple[int, int], str] = {}
        stride = 1
        for part in reversed(parts):
            size = self.size_of(part)
            if size is None:
                return {}
            table[(stride, size)] = part
            for (sub_stride, sub_size), sub_name in self._sub_table(part).items():
                table.setdefault((stride * sub_stride, sub_size), sub_name)
            stride *= size
        return table

    def _sub_table(self, name: str) -> dict[tuple[int, int], str]:
        return self._merged_table(name) if name in self.decompositions else {}

    def clashed(self, atom: Atom) -> bool:
        """Is this piece named differently by two factorings of its root (``H = 3`` and ``qkv``)?"""
        return (atom.stride, atom.size) in self._clashes.get(atom.root, ())

    def decide(self, atom: Atom, name: str) -> bool:
        """A use proved what a clashed piece is (the axis a fused projection is unbound along into
        its 3 parts is ``qkv``): keep only the factorings of its root that call it ``name``, for the
        whole trace. False when none does, or the choice leaves nothing (nothing is changed)."""
        root, key = atom.root, (atom.stride, atom.size)
        kept = [parts for parts in self.decompositions.get(root, ()) if self._leaf_table(parts).get(key) == name]
        if not kept or len(kept) == len(self.decompositions[root]):
            return False
        self.decompositions[root] = kept
        self._clashes.pop(root, None)
        self._sub_names[root] = self._merged_table(root)
        self.decided[root] = name
        self.forget_labels()
        return True

    def forget_labels(self) -> None:
        """Drop every remembered label, dims tuple and mixing verdict (the names changed)."""
        for cache in ("_label_cache", "_dims_cache", "_mix_cache"):
            self.__dict__.pop(cache, None)

    def feature_root_for_size(self, size: int) -> str | None:
        """The feature root a projection of this width produces (D, 3*D, 2*D, D_kv, H*d_k...).

        Only a unique match counts: when two roots have this width, none is chosen. A grouped-query
        q/k/v projection fused in one (``(H + 2·H_kv)·d_k``: Phi-3's ``qkv_proj``, GPTBigCode's
        ``c_attn``, Falcon's new architecture) is the sum ``D+2*D_kv``, never another root of the same
        width: at ``H = 2·H_kv`` it equals ``2·D``, whose split into ``(2, H, d_k)`` would name the axis
        of each group's q, k and v parts ``H``. Slices of the sum at its parts' bounds name the parts
        (:func:`sliced`); a view of it names only pieces of it."""
        if size == self._fused_grouped_qkv_width():
            return GROUPED_QKV if self.size_of("D") == self.size_of("H") * self.size_of("d_k") else None
        hits = list(dict.fromkeys(self.aliases.get(n, n) for n in ("D", "3*D", "2*D", "D_kv", "2*D_kv", "H*d_k",
                                                                    "3*H*d_k", "2*H*d_k", "2*d_k")
                                  if self.size_of(n) == size))
        for declared in ("H*d_k", "D", "D_kv"):   # a width made of declared names wins over a fused reading
            if len(hits) > 1 and declared in hits:
                return declared
        return hits[0] if len(hits) == 1 else None

    def _fused_grouped_qkv_width(self) -> int | None:
        heads, kv_heads, d_k = self.size_of("H"), self.size_of("H_kv"), self.size_of("d_k")
        if heads is None or kv_heads is None or d_k is None or kv_heads == heads:
            return None
        return (heads + 2 * kv_heads) * d_k

    def coinciding_sizes(self) -> list[tuple[str, str]]:
        names = [n for n in self.dims if self.role(n) is not None and n != "n_rep"]
        return [
            (a, b)
            for i, a in enumerate(names)
            for b in names[i + 1:]
            if self.dims[a] == self.dims[b] and self.dims[a] > 1
        ]

    # -- labels ------------------------------------------------------------
    def atom_label(self, atom: Atom) -> str:
        if atom.whole and atom.root in self.aliases:
            return self.aliases[atom.root]
        if atom.root.startswith(MIXED_PREFIX) or atom.root == UNKNOWN:
            return atom.root if atom.whole else f"{atom.root}/{atom.root_size // atom.size}"
        if atom.root == COPIES:
            return str(atom.size)
        if atom.whole:
            return atom.root
        known = self._sub_names.get(atom.root, {}).get((atom.stride, atom.size))
        if known:
            return self.aliases.get(known, known)
        if (atom.stride, atom.size) in self._clashes.get(atom.root, ()):
            return UNKNOWN   # H = 3 against the 3 of qkv: either name may be wrong, so neither is shown
        if atom.root == GROUPED_QKV:
            return UNKNOWN   # a block of q, k and v widths by stride says nothing (Falcon's groups of n_rep + 2)
        return piece_label(atom)

    def labels(self, axis: Axis) -> list[str]:
        labels = self._compose([self.atom_label(a) for a in coalesce(axis.atoms)])
        if self.__dict__.get("_sequences_swapped"):
            labels = [_SEQUENCE_WORD.sub(lambda m: "S" if m.group(0) == "T" else "T", lab) for lab in labels]
        return labels

    def swap_sequences(self) -> None:
        """Show the two token axes the other way round: ``T`` for what entered as ``S``, and back.
        Only for equal lengths, once the run has shown which one queries the other (the tracer decides)."""
        self._sequences_swapped = True
        self.forget_labels()

    def _compose(self, labels: list[str]) -> list[str]:
        """Replace runs of labels that spell a known product (H, d_k -> D)."""
        changed = True
        while changed and len(labels) > 1:
            changed = False
            for root, alternatives in self.decompositions.items():
                for parts in alternatives:
                    n = len(parts)
                    hit = next((i for i in range(len(labels) - n + 1) if tuple(labels[i:i + n]) == parts), None)
                    if hit is not None:
                        labels = labels[:hit] + [root] + labels[hit + n:]
                        changed = True
                        break
                if changed:
                    break
        return labels

    def label(self, axis: Axis) -> str | None:
        """The display/JSON name of an axis: a name, a product ``H*d_k``, ``!mix``, or None (memoised:
        the same axis is labelled on every op that reads it)."""
        if not axis.atoms:
            return None
        cache = self.__dict__.get("_label_cache")
        if cache is None:
            cache = self.__dict__["_label_cache"] = {}
        try:   # keyed by the axis (its hash is kept), not by its atoms (each hashed afresh)
            return cache[axis]
        except KeyError:
            found = cache[axis] = self._label(axis)
            return found

    def dims_of(self, axes: tuple[Axis, ...]) -> tuple[str | None, ...]:
        """The labels of every axis of a tensor (memoised per axes: the same layer's tensors repeat)."""
        cache = self.__dict__.get("_dims_cache")
        if cache is None:
            cache = self.__dict__["_dims_cache"] = {}
        found = cache.get(axes)
        if found is None:
            found = cache[axes] = tuple(self.label(a) for a in axes)
        return found

    def _label(self, axis: Axis) -> str | None:
        labels = self.labels(axis)
        if any(UNKNOWN in lab for lab in labels):
            return None
        if len(labels) == 1:
            return labels[0]
        joined = "*".join(lab.lstrip(MIXED_PREFIX) for lab in labels)
        mixed = self.mix_kind(axis) == "error" or any(lab.startswith(MIXED_PREFIX) for lab in labels if lab != "?")
        return MIXED_PREFIX + joined if mixed else joined

    def mix_kind(self, axis: Axis) -> str | None:
        """``"error"`` if the axis regroups pieces of tokens/batch with anything else,
        ``"warning"`` if whole token axes are flattened together with features,
        ``"note"`` for an unusual split of features only, else None (memoised per axis: it reads
        only the axis and this namer's fixed sizes and roles)."""
        cache = self.__dict__.get("_mix_cache")
        if cache is None:
            cache = self.__dict__["_mix_cache"] = {}
        try:
            return cache[axis]
        except KeyError:
            found = cache[axis] = self._mix_kind(axis)
            return found

    def _mix_kind(self, axis: Axis) -> str | None:
        atoms = tuple(a for a in coalesce(axis.atoms) if a.root != COPIES)
        if any(a.root.startswith(MIXED_PREFIX) for a in atoms):
            if _mix_has_tokens(atoms, self):
                return "error"
            return "note" if self._only_features(atoms) else None   # pixels or unknown axes: nothing known
        labels = self._compose([self.atom_label(a) for a in atoms])
        token_atoms = [a for a in atoms if self.is_token_root(a.root)]
        if token_atoms and len(token_atoms) == len(atoms):
            pieces = any(not a.whole for a in atoms)
            batched = any(self.role(a.root) == Role.BATCH for a in atoms)
            # B·nW (Swin's windows batched with the batch): a note; pieces of tokens alone (Hp/2 and Hp%2,
            # chunks of T) are a plain split: nothing to say; attention checks the use either way
            return "windows" if pieces and batched else None
        if token_atoms and len(atoms) > 1:
            if merges_neighbours(atoms, self):
                return None   # neighbouring patches' features side by side: Swin's patch merging
            if any(not a.whole for a in token_atoms):
                return "error"  # pieces of tokens regrouped with something else
            if any(is_piece_label(lab) for lab in labels) and any(self.role(a.root) == "tokens" for a in token_atoms):
                return "error"  # tokens regrouped with an unnamed slice of features (batch with one is B·H-like)
            if any(self.role(a.root) == "tokens" for a in token_atoms) and len(token_atoms) < len(atoms):
                return "warning"  # whole tokens flattened together with features (B*H is fine)
        if any(is_piece_label(lab) and not self._inside_named(a) and self.role(a.root) != Role.HEAD_FEATURES
               for a, lab in zip(atoms, labels) if not self.is_token_root(a.root) and a.root != UNKNOWN):
            return "note"   # (pieces within one head's features, RoPE's (d_k/2, 2), are not a head split)
        return None

    def _only_features(self, atoms: Sequence[Atom]) -> bool:
        """Are the pieces mixed here all features, heads or head features (a split of D)?"""
        names = [_root_of_label(name) for a in atoms for name in base_names(a.root)]
        return bool(names) and all(self.role(n) in (Role.FEATURES, Role.HEADS, Role.HEAD_FEATURES, "stack")
                                   for n in names)

    def _inside_named(self, atom: Atom) -> bool:
        """Does this unnamed piece lie within one named piece of its root (a piece of ``d_k``)?"""
        return any(stride <= atom.stride and atom.stride * atom.size <= stride * size
                   and (atom.stride - stride) % stride == 0
                   for (stride, size) in self._sub_names.get(atom.root, {}))

    def leaves(self, atom: Atom) -> tuple[Atom, ...]:
        """A whole atom cut into its known named parts (``D`` -> ``H``, ``d_k``)."""
        table = self._sub_names.get(atom.root)
        if not atom.whole or not table:
            return (atom,)
        leaf_keys = [k for k in table if not any(  # keep the pieces with no named piece inside
            o != k and k[0] <= o[0] and o[0] * o[1] <= k[0] * k[1] for o in table)]
        parts, covered = [], 1
        for stride, size in sorted(leaf_keys, key=lambda k: -k[0]):
            parts.append(Atom(atom.root, atom.root_size, stride, size))
            covered *= size
        return tuple(parts) if covered == atom.root_size else (atom,)


#: the roots a convolution gives its output's positions, by how many it slides over (1-, 2-, 3-D);
#: flattened in this order they are the tokens ``N`` (:func:`default_decompositions`)
GRID_ROOTS = {1: ("N",), 2: ("Hp", "Wp"), 3: ("Fp", "Hp", "Wp")}
#: the axes of a 2-d or 3-d patch grid (a convolution's output positions)
_PLANE_GRID = frozenset(GRID_ROOTS[2] + GRID_ROOTS[3])


def merges_neighbours(atoms: Sequence[Atom], namer: Namer) -> bool:
    """Whole features joined with the innermost pieces of the patch grid (``Wp%2·Hp%2·D``: which patch
    of each 2×2 block): Swin's patch merging and pixel unshuffle put the features of neighbouring
    patches side by side, and the blocks (``Hp/2``, ``Wp/2``) stay the grid. Not a mix of tokens."""
    grid = [a for a in atoms if a.root in _PLANE_GRID]
    rest = [a for a in atoms if a.root not in _PLANE_GRID]
    return bool(grid) and bool(rest) and all(not a.whole and a.stride == 1 for a in grid) and \
        all(a.whole and namer.role(a.root) == Role.FEATURES for a in rest)


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
    if "B" in dims and "nW" in dims:
        out["B*nW"] = [("B", "nW")]
    out.setdefault("N", [])   # a convolution's patch grid, flattened in order, is its tokens
    out["N"] += [GRID_ROOTS[2], GRID_ROOTS[3]]
    return out


def coalesce(atoms: Sequence[Atom]) -> tuple[Atom, ...]:
    """Merge neighbouring pieces of one root that sit next to each other in it."""
    out: list[Atom] = []
    for atom in atoms:
        if atom.size == 1 and atom.root_size != 1:
            continue
        if out:
            prev = out[-1]
            if prev.root == atom.root and prev.stride == atom.stride * atom.size:
                out[-1] = Atom(atom.root, atom.root_size, atom.stride, prev.size * atom.size)
                continue
        out.append(atom)
    return tuple(out)


# ---------------------------------------------------------------------------
# view / reshape / flatten / unflatten
# ---------------------------------------------------------------------------

def reshape_axes(axes: Sequence[Axis], out_shape: Sequence[int],
                 namer: Namer | None = None) -> tuple[Axis, ...]:
    """Names after ``view``/``reshape`` to ``out_shape`` (sizes must multiply out).

    Groups input and output axes whose sizes multiply to the same product, then
    re-cuts each group's atoms at the output boundaries.

    >>> t, d = root_axis("T", 6), root_axis("D", 512)
    >>> [a.size for a in reshape_axes([t, d], [6, 8, 64])]
    [6, 8, 64]
    """
    in_sizes = [a.size for a in axes]
    out_sizes = list(out_shape)
    if math.prod(in_sizes) != math.prod(out_sizes):
        raise ValueError(f"cannot reshape {in_sizes} to {out_sizes}")
    result: list[Axis | None] = [None] * len(out_sizes)
    in_idx = [i for i, s in enumerate(in_sizes) if s != 1]
    out_idx = [j for j, s in enumerate(out_sizes) if s != 1]
    for gi, gj in _groups([in_sizes[i] for i in in_idx], [out_sizes[j] for j in out_idx]):
        group_in = [axes[in_idx[i]] for i in gi]
        new = _recut([a.atoms for a in group_in], [out_sizes[out_idx[j]] for j in gj], namer)
        for j, atoms in zip(gj, new):
            role = _carried_role(group_in, atoms)
            result[out_idx[j]] = Axis(atoms, role)
    # size-1 axes that carry a name (a decode step's T[-1:], B = 1): kept in order, into an output
    # axis of size 1, else inside the merged axis that holds their neighbour (view(-1, D) on
    # [B, T[-1:], D] is [B*T[-1:], D]), from where a later split takes them out again
    carried_ones = [Axis((atom,)) for a in axes for atom in a.atoms if atom.size == 1 and a.size != 1] + \
        [a for a in axes if a.size == 1 and a.atoms]
    slots = [j for j, s in enumerate(out_sizes) if result[j] is None and s == 1]
    for j in range(len(out_sizes)):
        if result[j] is None:
            result[j] = carried_ones.pop(0) if (j in slots and carried_ones) else Axis()
    if carried_ones and not slots:
        _merge_ones(result, axes, carried_ones)
    return tuple(result)  # type: ignore[arg-type]


def _merge_ones(result: list, axes: Sequence[Axis], ones: list[Axis]) -> None:
    """Put named size-1 axes inside the output axis that holds the atoms of the axis before them."""
    for one in ones:
        where = list(axes).index(one) if one in axes else -1
        before = next((a for a in reversed(axes[:where]) if a.size != 1), None) if where > 0 else None
        if before is None or not before.atoms:
            continue
        for j, out in enumerate(result):
            if out is not None and before.atoms[-1] in out.atoms:
                result[j] = Axis(out.atoms + one.atoms, out.role)
                break


def _carried_role(group_in: Sequence[Axis], atoms: tuple[Atom, ...]) -> str | None:
    for axis in group_in:
        if axis.atoms == atoms:
            return axis.role
    return None


def _groups(ins: list[int], outs: list[int]) -> list[tuple[list[int], list[int]]]:
    groups = []
    i = j = 0
    while i < len(ins) and j < len(outs):
        gi, gj = [i], [j]
        pi, pj = ins[i], outs[j]
        while pi != pj:
            if pi < pj:
                i += 1
                gi.append(i)
                pi *= ins[i]
            else:
                j += 1
                gj.append(j)
                pj *= outs[j]
        groups.append((gi, gj))
        i += 1
        j += 1
    return groups


def _recut(in_atom_lists: Sequence[tuple[Atom, ...]], out_sizes: list[int],
           namer: Namer | None) -> list[tuple[Atom, ...]]:
    atoms = [a for lst in in_atom_lists for a in lst if a.size != 1]
    atom_strides = row_major([a.size for a in atoms])
    out_strides = row_major(out_sizes)
    total = math.prod(out_sizes)
    bounds = sorted({*atom_strides, *out_strides, total})
    if all(b2 % b1 == 0 for b1, b2 in zip(bounds, bounds[1:])):
        return _recut_chain(atoms, atom_strides, out_sizes, out_strides, bounds)
    if namer is not None:  # name the finest known parts in what gets mixed (T*H, not T*D)
        atoms = [leaf for a in atoms for leaf in namer.leaves(a)]
        atom_strides = row_major([a.size for a in atoms])
    return [_opaque(atoms, atom_strides, s, n, namer) for s, n in zip(out_strides, out_sizes)]


def _recut_chain(atoms, atom_strides, out_sizes, out_strides, bounds) -> list[tuple[Atom, ...]]:
    pieces: list[tuple[int, Atom]] = []  # (group stride, sub-atom), major first
    for atom, g in zip(atoms, atom_strides):
        inner = [b for b in bounds if g <= b <= g * atom.size]
        for lo, hi in reversed(list(zip(inner, inner[1:]))):
            sub = Atom(atom.root, atom.root_size, atom.stride * (lo // g), hi // lo)
            pieces.append((lo, sub))
    pieces.sort(key=lambda p: -p[0])
    out = []
    for stride, size in zip(out_strides, out_sizes):
        out.append(tuple(a for g, a in pieces if stride <= g < stride * size))
    return out


def _opaque(atoms, atom_strides, stride: int, size: int, namer: Namer | None) -> tuple[Atom, ...]:
    """One atom naming every input atom that this output axis walks across."""
    touched = [(a, g) for a, g in zip(atoms, atom_strides) if _walks_across(stride, size, g, a.size)]
    if len(touched) == 1 and touched[0][0].size == size and touched[0][1] == stride:
        return (touched[0][0],)
    names: list[str] = []
    for a, _g in touched:
        label = namer.atom_label(a) if namer else a.root
        name = label[1:] if label.startswith(MIXED_PREFIX) else _root_of_label(label)
        for part in name.split("*"):
            if part not in names:
                names.append(part)
    return (Atom(MIXED_PREFIX + "*".join(names), size, 1, size),)


def _walks_across(stride: int, size: int, atom_stride: int, atom_size: int) -> bool:
    """Does stepping ``size`` times by ``stride`` change the digit of this atom?"""
    if size <= 1 or atom_size <= 1:
        return False
    span = atom_stride * atom_size
    r = stride % span
    if r == 0:
        return False
    if r >= atom_stride:
        return True
    return size - 1 >= -(-atom_stride // r)


# ---------------------------------------------------------------------------
# moving, adding and removing axes
# ---------------------------------------------------------------------------

def permute_axes(axes: Sequence[Axis], order: Sequence[int]) -> tuple[Axis, ...]:
    return tuple(axes[i] for i in order)


def transpose_order(ndim: int, d0: int, d1: int) -> list[int]:
    order = list(range(ndim))
    d0, d1 = d0 % ndim, d1 % ndim
    order[d0], order[d1] = order[d1], order[d0]
    return order


def unsqueeze_axes(axes: Sequence[Axis], dim: int) -> tuple[Axis, ...]:
    dim = dim % (len(axes) + 1)
    return tuple(axes[:dim]) + (Axis(),) + tuple(axes[dim:])


def squeeze_axes(axes: Sequence[Axis], out_shape: Sequence[int]) -> tuple[Axis, ...]:
    """Drop size-1 axes so that what is left has ``out_shape``."""
    kept = list(axes)
    while len(kept) > len(out_shape):
        for i, (a, s) in enumerate(zip(kept, list(out_shape) + [None])):
            if a.size == 1 and s != 1:
                del kept[i]
                break
        else:
            for i in range(len(kept) - 1, -1, -1):
                if kept[i].size == 1:
                    del kept[i]
                    break
    return tuple(kept)


def expand_axes(axes: Sequence[Axis], out_shape: Sequence[int], namer: Namer) -> tuple[Axis, ...]:
    """``expand``: new leading axes and size-1 axes grown to ``n`` (stride 0): broadcast copies.

    A grown axis next to ``H_kv`` whose size is ``n_rep`` is the GQA repeat; others are unnamed.
    """
    lead = len(out_shape) - len(axes)
    out = []
    for j, size in enumerate(out_shape):
        src = axes[j - lead] if j >= lead else Axis()
        if src.size == size:
            out.append(src)
            continue
        before = axes[j - lead - 1] if j - lead - 1 >= 0 else None
        grown = _grown_axis(size, namer, before)
        out.append(grown if grown.atoms and grown.atoms[0].root != COPIES else unknown_axis(size))
    return tuple(out)


def _grown_axis(size: int, namer: Namer, src: Axis | None = None) -> Axis:
    """The new axis of ``expand``/``repeat``: copies, named only where provenance says what they are.

    Repeating key/value heads (``H_kv``) ``n_rep`` times gives the query heads (GQA), so that copy
    count is ``n_rep``; any other count of copies has no name (a repeat along tokens is not batch).
    """
    kv_heads = src is not None and (namer.label(src) == "H_kv" if src.atoms else namer.dims.get("H_kv") == 1)
    if kv_heads and namer.size_of("n_rep") == size:
        return root_axis("n_rep", size)
    return Axis((Atom(COPIES, size, 1, size),)) if size != 1 else Axis()


def repeat_axes(axes: Sequence[Axis], repeats: Sequence[int], namer: Namer) -> tuple[Axis, ...]:
    """``repeat`` tiles: the copy index is the *major* part of each grown axis (``2·T``)."""
    lead = len(repeats) - len(axes)
    out = []
    for j, r in enumerate(repeats):
        src = axes[j - lead] if j >= lead else Axis()
        out.append(src if r == 1 else Axis(_grown_axis(r, namer).atoms + src.atoms))
    return tuple(out)


def repeat_interleave_axes(axes: Sequence[Axis], repeats: int, dim: int | None,
                           namer: Namer) -> tuple[Axis, ...]:
    """``repeat_interleave``: each element repeated in place, the copy index is *minor* (``T·2``);
    key/value heads repeated ``n_rep`` times are the query heads ``H`` (GQA)."""
    if dim is None:
        flat = reshape_axes(axes, [math.prod(sizes_of(axes))], namer)[0]
        return (Axis(flat.atoms + _grown_axis(repeats, namer).atoms),)
    dim %= len(axes)
    grown = Axis(axes[dim].atoms + _grown_axis(repeats, namer, axes[dim]).atoms)
    return tuple(axes[:dim]) + (grown,) + tuple(axes[dim + 1:])


def index_axes(axes: Sequence[Axis], spec: Sequence[str], items: Sequence, out_shape: Sequence[int],
               namer: Namer) -> tuple[Axis, ...] | None:
    """Indexing. ``spec`` has one entry per index item: ``"int"`` (drops an axis), ``"slice"``
    (keeps it: whole, or a derived ``T[0:1]`` name when shorter), ``"full"``, ``"none"`` (a new
    size-1 axis), ``"..."``, ``"adv"`` (a tensor or list). One advanced index replaces its axis
    with the index's (unnamed) axes in place; anything more involved returns None (unnamed)."""
    if spec.count("adv") > 1 or spec.count("...") > 1:
        return None
    consumed = sum(1 for s in spec if s in ("int", "slice", "full", "adv"))
    out: list[Axis] = []
    i = 0
    for item, kind in zip(items, spec):
        if kind == "...":
            n = len(axes) - consumed
            out.extend(axes[i:i + n])
            i += n
        elif kind == "none":
            out.append(Axis())
        elif kind == "int":
            i += 1
        elif kind == "full":
            out.append(axes[i])
            i += 1
        elif kind == "slice":
            size = len(range(*item.indices(axes[i].size)))
            start = item.indices(axes[i].size)[0] if item.step in (None, 1) else None
            out.append(sliced(axes[i], size, namer, start) if item.step in (None, 1) else unknown_axis(size))
            i += 1
        else:  # one advanced index: its own axes take this axis's place
            index_dims = len(out_shape) - len(out) - (len(axes) - i - 1)
            out.extend(unknown_axes(out_shape[len(out):len(out) + index_dims]))
            i += 1
    out.extend(axes[i:])
    return tuple(out)





def split_axes(axes: Sequence[Axis], dim: int, pieces: Sequence[int],
               namer: Namer | None = None) -> list[tuple[Axis, ...]]:
    """``split``/``chunk``: ``k`` equal pieces of a product axis are its minor factor (``3*D`` in
    three gives three ``D``) when that factor has a name; otherwise each piece is a derived slice
    (``D[0:64]``), never the whole axis's name."""
    dim %= len(axes)
    axis = axes[dim]
    n = axis.size
    fused = _fused_parts(axis, len(pieces), namer) if len(set(pieces)) == 1 else None
    if fused is not None:
        return [tuple(axes[:dim]) + (fused,) + tuple(axes[dim + 1:]) for _ in pieces]
    if len(set(pieces)) == 1 and pieces and n % pieces[0] == 0 and n // pieces[0] > 1 and namer is not None:
        _major, minor = reshape_axes([axis], [n // pieces[0], pieces[0]], namer)
        label = namer.label(minor)
        if label is not None and not is_piece_label(label) and not label.startswith(MIXED_PREFIX):
            return [tuple(axes[:dim]) + (minor,) + tuple(axes[dim + 1:]) for _ in pieces]
    outs, start = [], 0
    for size in pieces:
        piece = sliced(axis, size, namer, start) if namer is not None else unknown_axis(size)
        outs.append(tuple(axes[:dim]) + (piece,) + tuple(axes[dim + 1:]))
        start += size
    return outs


def _fused_parts(axis: Axis, count: int, namer: Namer | None) -> Axis | None:
    """``qkv.chunk(3)`` / ``kv.split(D)``: a whole fused width cut into its stack count gives the inner
    width (``3*D`` -> ``D``), whatever the head sizes (a per-head layout is split after a view)."""
    if namer is None or len(axis.atoms) != 1 or not axis.atoms[0].whole:
        return None
    root = namer.aliases.get(axis.atoms[0].root, axis.atoms[0].root)
    factor, _, inner = root.partition("*")
    if factor.isdigit() and int(factor) == count and namer.size_of(inner) == axis.size // count:
        return root_axis(namer.aliases.get(inner, inner), axis.size // count)
    return None


def unbind_axes(axes: Sequence[Axis], dim: int) -> tuple[Axis, ...]:
    dim %= len(axes)
    return tuple(axes[:dim]) + tuple(axes[dim + 1:])


def cat_axes(inputs: Sequence[Sequence[Axis]], dim: int, namer: Namer) -> tuple[Axis, ...]:
    """``cat``: the joined axis is ``S+T`` (every part named) or unnamed; the other axes keep the
    names the inputs agree on."""
    dim %= len(inputs[0])
    total = sum(inp[dim].size for inp in inputs)
    inputs = [inp for inp in inputs if inp[dim].size > 0] or list(inputs)   # an empty cache adds nothing
    first = list(inputs[0])
    labels = [namer.label(inp[dim]) if inp[dim].size != 1 else "1" for inp in inputs]   # one more: T+1
    whole = _reordered_whole(labels, total, namer)
    if whole is not None:
        first[dim] = root_axis(whole, total)   # the halves of d_k swapped (RoPE's rotate_half): still d_k
    elif labels and all(lab and not lab.startswith(MIXED_PREFIX) for lab in labels) and \
            any(not lab.isdigit() for lab in labels):
        joined = _joined_parts(labels)
        # the tokens of a sequence declared with this length (a class token and N patches, T = 1+N)
        declared = next((n for n in ("T", "S") if namer.size_of(n) == total), None)
        if declared is not None and namer.role(joined) == "tokens":
            joined = declared
        first[dim] = Axis((Atom(joined, total, 1, total),))
    else:
        first[dim] = unknown_axis(total)
    for j in range(len(first)):
        if j == dim:
            continue
        if len({namer.label(inp[j]) for inp in inputs}) > 1:   # the parts disagree, or one is unnamed
            first[j] = unknown_axis(first[j].size)
    return tuple(first)


def _joined_parts(labels: list[str]) -> str:
    """``["1", "1", "N"]`` -> ``2+N``: the counted parts (class and distillation tokens) add up."""
    parts = [part for lab in labels for part in lab.split("+")]   # T+1 and 1 more: T+2
    counted = sum(int(part) for part in parts if part.isdigit())
    named = [part for part in parts if not part.isdigit()]
    return "+".join(([str(counted)] if counted and labels[0].isdigit() else []) + named
                    + ([str(counted)] if counted and not labels[0].isdigit() else []))


def _reordered_whole(labels: list, total: int, namer: Namer) -> str | None:
    """``["d_k[4:8]", "d_k[0:4]"]`` covering all of ``d_k``: the name of the whole axis, else None."""
    ranges, bases = [], set()
    for lab in labels:
        if not lab or "[" not in lab or not lab.endswith("]"):
            return None
        base, _, span = lab[:-1].partition("[")
        start, _, stop = span.partition(":")
        if not start.isdigit() or not stop.isdigit():
            return None
        bases.add(base)
        ranges.append((int(start), int(stop)))
    if len(bases) != 1 or namer.size_of(next(iter(bases))) != total:
        return None
    covered = sorted(ranges)
    if covered[0][0] != 0 or covered[-1][1] != total or any(a[1] != b[0] for a, b in zip(covered, covered[1:])):
        return None
    return bases.pop()


def stack_axes(inputs: Sequence[Sequence[Axis]], dim: int) -> tuple[Axis, ...]:
    first = list(inputs[0])
    dim %= len(first) + 1
    return tuple(first[:dim]) + (unknown_axis(len(inputs)),) + tuple(first[dim:])


# ---------------------------------------------------------------------------
# compute ops
# ---------------------------------------------------------------------------

def broadcast_axes(inputs: Sequence[Sequence[Axis]], out_shape: Sequence[int]) -> tuple[Axis, ...]:
    """Elementwise ops: each output axis takes its name from an input that is not broadcast there."""
    out = []
    n = len(out_shape)
    for j, size in enumerate(out_shape):
        chosen = None
        for axes in inputs:
            k = j - (n - len(axes))
            if 0 <= k < len(axes) and axes[k].size == size and (size == 1 or axes[k].atoms):
                if axes[k].atoms and (chosen is None or _is_unknown(chosen)):
                    chosen = axes[k]
        out.append(chosen if chosen is not None else unknown_axis(size))
    return tuple(out)


def _is_unknown(axis: Axis) -> bool:
    return any(a.root == UNKNOWN for a in axis.atoms)


def linear_axes(axes: Sequence[Axis], out_features: int, namer: Namer,
                structural: bool = True) -> tuple[Axis, ...]:
    """``linear`` keeps the leading axes and names the new feature axis by what the weight does to
    the input's features: the same width (``D``), three or two times it (fused ``3*D``/``2*D``),
    or ``H*d_k`` when heads are narrower than the model. An input whose features are unnamed, or a
    weight that is not a module's parameter, gives unnamed features."""
    last_in = axes[-1] if axes else Axis()
    source = namer.label(last_in) if last_in.atoms else None
    if not structural or source is None or namer.role(source.lstrip(MIXED_PREFIX)) not in ("features",):
        return tuple(axes[:-1]) + (unknown_axis(out_features),)
    root = namer.feature_root_for_size(out_features)
    if root is None and out_features == last_in.size:
        root = source
    last = root_axis(root, out_features) if root else unknown_axis(out_features)
    return tuple(axes[:-1]) + (last,)




def conv_axes(axes: Sequence[Axis], out_shape: Sequence[int], namer: Namer,
              structural: bool = True) -> tuple[Axis, ...]:
    """``conv1d/2d/3d``: ``[B, C_in, *positions]`` becomes ``[B, C_out, *positions']``.

    The batch axis is the input's (or ``B`` where the declared size fits); the channels are named
    like a projection's features (``D`` when the width is the model's); each output position axis
    keeps the input's name where the size is unchanged (a same-padded conv over tokens), and is
    otherwise the patch grid (``Hp``, ``Wp``: a ViT stem), which flattened in order is ``N``. An
    unbatched input, or a filter that is not a module's parameter, names positions and batch only."""
    spatial = len(out_shape) - 2
    roots = GRID_ROOTS.get(spatial)
    if roots is None or len(axes) != len(out_shape):
        return unknown_axes(tuple(out_shape))
    batch = axes[0] if namer.label(axes[0]) is not None else (
        root_axis("B", out_shape[0]) if namer.size_of("B") in (None, out_shape[0]) else unknown_axis(out_shape[0]))
    width = out_shape[1]
    feature = namer.feature_root_for_size(width) if structural else None
    channels = root_axis(feature, width) if feature else unknown_axis(width)
    positions = []
    for src, root, size in zip(axes[2:], roots, out_shape[2:]):
        keep = src.size == size and namer.label(src) is not None and namer.is_token_root(src.atoms[0].root)
        positions.append(src if keep else root_axis(root, size))
    return (batch, channels, *positions)


def matmul_axes(a: Sequence[Axis], b: Sequence[Axis], out_shape: Sequence[int],
                namer: Namer) -> tuple[Axis, ...]:
    """``a @ b``: batch axes broadcast, ``a``'s rows and ``b``'s columns stay, the inner pair is contracted."""
    a2 = list(a) if len(a) > 1 else [Axis()] + list(a)
    b2 = list(b) if len(b) > 1 else list(b) + [Axis()]
    batch_len = len(out_shape) - (len(a) > 1) - (len(b) > 1)
    batch = broadcast_axes([a2[:-2], b2[:-2]], out_shape[:batch_len]) if batch_len else ()
    row, col = a2[-2], b2[-1]
    if _is_token(row, namer) and _is_token(col, namer):
        row, col = row.with_role("query"), col.with_role("key")
    else:
        row, col = row.with_role(None), col.with_role(None)
    tail = ([row] if len(a) > 1 else []) + ([col] if len(b) > 1 else [])
    return tuple(batch) + tuple(tail)


def _is_token(axis: Axis, namer: Namer) -> bool:
    label = namer.label(axis)
    return label is not None and namer.role(label) == "tokens"


def einsum_axes(parsed: dict, operands: Sequence[Sequence[Axis]], namer: Namer) -> tuple[Axis, ...] | None:
    """Names for ``einsum`` from its parsed subscripts (``{"inputs": [...], "output": ...}``)."""
    terms, rhs = parsed["inputs"], parsed["output"]
    if len(terms) != len(operands):
        return None
    by_letter: dict[str, tuple[int, Axis]] = {}
    for k, (term, axes) in enumerate(zip(terms, operands)):
        if len(term) != len(axes):
            return None
        for letter, axis in zip(term, axes):
            if letter not in by_letter or (by_letter[letter][1].size == 1 and axis.size != 1):
                by_letter[letter] = (k, axis)
    if any(c not in by_letter for c in rhs):
        return None
    out = [by_letter[c][1].with_role(None) for c in rhs]
    if len(rhs) >= 2 and len(operands) == 2:
        (ka, ra), (kb, cb) = by_letter[rhs[-2]], by_letter[rhs[-1]]
        if ka == 0 and kb == 1 and _is_token(ra, namer) and _is_token(cb, namer):
            out[-2], out[-1] = ra.with_role("query"), cb.with_role("key")
    return tuple(out)


def einsum_contracted(parsed: dict) -> list[str]:
    """Letters summed over: in an input, not in the output."""
    return [c for c in dict.fromkeys("".join(parsed["inputs"])) if c not in parsed["output"]]


def sdpa_axes(q: Sequence[Axis], v: Sequence[Axis], shape: Sequence[int]) -> tuple[Axis, ...]:
    """``scaled_dot_product_attention``: the queries' axes with the values' features."""
    out = tuple(a.with_role(None) for a in q[:-1]) + (v[-1],)
    return out if sizes_of(out) == tuple(shape) else unknown_axes(shape)




# ---------------------------------------------------------------------------
# as_strided: output axes read off the operand's own layout
# ---------------------------------------------------------------------------

#: one digit of an operand's memory: (memory stride, size, the piece of a root it walks)
_Digit = tuple[int, int, Atom]


def _digits(axes: Sequence[Axis], strides: Sequence[int]) -> list[_Digit] | None:
    """The operand's memory as digits, finest first: each axis's atoms, with the memory stride each
    one steps by. None when two digits overlap (an expanded or overlapping operand)."""
    out: list[_Digit] = []
    for axis, stride in zip(axes, strides):
        inner = 1
        for atom in reversed(axis.atoms):
            if atom.size > 1:
                if stride <= 0:
                    return None
                out.append((stride * inner, atom.size, atom))
            inner *= atom.size
    out.sort(key=lambda d: d[0])
    if any(a[0] * a[1] > b[0] for a, b in zip(out, out[1:])):
        return None
    return out


def _cut_digits(digits: list[_Digit], cuts: set[int]) -> list[_Digit]:
    """Digits split where an output axis starts or ends inside one (and the pieces nest)."""
    out: list[_Digit] = []
    for g, m, atom in digits:
        edges = [g] + sorted(c for c in cuts if g < c < g * m and c % g == 0 and (g * m) % c == 0) + [g * m]
        if any(hi % lo for lo, hi in zip(edges, edges[1:])):
            edges = [g, g * m]
        for lo, hi in zip(edges, edges[1:]):
            out.append((lo, hi // lo, Atom(atom.root, atom.root_size, atom.stride * (lo // g), hi // lo)))
    return out


def _run(digits: list[_Digit], stride: int, size: int) -> list[int] | None:
    """Indices of the digits one output axis ``(stride, size)`` walks exactly, finest first."""
    start = next((i for i, d in enumerate(digits) if d[0] == stride), None)
    if start is None:
        return None
    run, total = [start], digits[start][1]
    while total < size:
        last = digits[run[-1]]
        nxt = run[-1] + 1
        if nxt >= len(digits) or digits[nxt][0] != last[0] * last[1]:
            return None
        run.append(nxt)
        total *= digits[nxt][1]
    return run if total == size else None


def strided_axes(axes: Sequence[Axis], strides: Sequence[int], out_shape: Sequence[int],
                 out_strides: Sequence[int], namer: Namer) -> tuple[Axis, ...]:
    """``as_strided``: each output axis named by the operand's memory digits it walks exactly.

    An output axis that steps by the memory stride of some piece of the operand and covers whole
    pieces is those pieces (``T`` cut into windows of ``w``: ``T/w``, ``T%w``). One that walks across
    pieces it does not cover whole (overlapping windows) is unnamed, and so is every axis whose pieces
    it crosses; where it crosses pieces of two different named axes (heads and tokens: strides written
    for another layout) it is a mixed axis, named after what it mixes."""
    digits = _digits(axes, strides)
    if digits is None or len(out_shape) != len(out_strides):
        return unknown_axes(tuple(out_shape))
    cuts = {c for s, n in zip(out_strides, out_shape) if n > 1 for c in (s, s * n)}
    digits = _cut_digits(digits, cuts)
    runs = [(_run(digits, s, n) if n > 1 else []) for s, n in zip(out_strides, out_shape)]
    used = [i for run in runs if run for i in run]
    if len(used) != len(set(used)):
        return unknown_axes(tuple(out_shape))
    loose = [(s, n) for (s, n), run in zip(zip(out_strides, out_shape), runs) if n > 1 and run is None]
    out = []
    for (s, n), run in zip(zip(out_strides, out_shape), runs):
        if n == 1:
            out.append(Axis())
        elif run is None:
            out.append(_strided_mix(digits, s, n, namer))
        elif any(_walks_across(ls, ln, digits[i][0], digits[i][1]) for ls, ln in loose for i in run):
            out.append(unknown_axis(n))
        else:
            out.append(Axis(tuple(digits[i][2] for i in reversed(run))))
    return tuple(out)


def _strided_mix(digits: list[_Digit], stride: int, size: int, namer: Namer) -> Axis:
    """An output axis that no run of digits makes: a mixed axis if it crosses pieces of two named
    roots of different roles, else unnamed (a window sliding along one axis)."""
    crossed = [d[2] for d in digits if _walks_across(stride, size, d[0], d[1])]
    names = list(dict.fromkeys(_root_of_label(namer.atom_label(a)) for a in crossed))
    if len(names) < 2 or any(n == UNKNOWN or n.startswith(MIXED_PREFIX) or namer.role(n) is None for n in names):
        return unknown_axis(size)
    return Axis((Atom(MIXED_PREFIX + "*".join(names), size, 1, size),))
