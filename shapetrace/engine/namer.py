"""The :class:`Namer`: the named sizes of one model, and the labels it gives atoms and axes.

It knows the declared sizes and roles, how a root factors (``D = H·d_k``), which pieces two factorings
name differently (shown unnamed until a use decides), and turns an :class:`~.axes.Axis` into a label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from shapetrace.engine.axes import (
    COPIES,
    FUSED_HEAD_ROOTS,
    GROUPED_QKV,
    MIXED_PREFIX,
    MQA_QKV,
    NARROW_GROUPED_QKV,
    NARROW_MQA_QKV,
    ROLES,
    TOKEN_ROLES,
    UNKNOWN,
    Atom,
    Axis,
    Role,
    _mix_has_tokens,
    _root_of_label,
    base_names,
    coalesce,
    default_decompositions,
    is_piece_label,
    merges_neighbours,
    piece_label,
    reorders_one_root,
)
from shapetrace.engine.vocabulary import FEATURE_WIDTHS, GRID_AXES, OWN_WIDTHS, STACK_FACTORS


def narrower_query_heads(namer: Namer, size: int) -> bool:
    """Is ``size`` the one key/value head's width d_k, with d_k only derived as D / H (not declared), while
    it is as well the width of H query heads of ``size / H`` features? Gemma-2B has one key/value head and
    sets ``head_dim`` apart from D / H, so a query projection of H narrower heads has that width too:
    neither name is proven until ``--dims`` gives d_k. (With more key/value heads, their width H_kv·d_k
    is still read as D_kv.)"""
    heads = namer.size_of("H")
    return bool(namer.derived_head_width and namer.size_of("H_kv") == 1 and namer.size_of("d_k") == size
                and heads and heads > 1 and size % heads == 0 and size != namer.size_of("D"))


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
    #: roots whose named pieces a label read (:meth:`relabelled` compares it with the decisions)
    read: set[str] = field(default_factory=set, repr=False)
    #: decided roots whose pieces a label read before the decision, or whose size or role it changed
    relabelled: set[str] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self.dims = dict(self.dims)
        d = self.dims
        self.derived_head_width = "D" in d and "H" in d and "d_k" not in d and bool(d["H"]) and d["D"] % d["H"] == 0
        if self.derived_head_width:
            d["d_k"] = d["D"] // d["H"]
        if "H" in d and "H_kv" in d and "n_rep" not in d and d["H_kv"] and d["H"] % d["H_kv"] == 0:
            d["n_rep"] = d["H"] // d["H_kv"]
        if not self.decompositions:
            self.decompositions = default_decompositions(d)
        self.sum_sizes = _sum_sizes(d, self.decompositions)   # (``H+2*H_kv``: a fused projection's heads)
        # multi-query attention (one key/value head): D_kv is d_k itself and n_rep is H
        self.aliases = {"D_kv": "d_k", "n_rep": "H"} if d.get("H_kv") == 1 and "d_k" in d else {}
        for root in self.decompositions:
            self._sub_names[root] = _merged_table(self, root)

    # -- roles ---------------------------------------------------------------
    def plain_role(self, label: str | None) -> str | None:
        """The role of a plain (not mixed, not unknown) axis name; None when it has none."""
        if not label or label.startswith(MIXED_PREFIX) or UNKNOWN in label:
            return None
        return self.role(label)

    def broadcast_clash(self, operands) -> tuple[int, int, int] | None:
        """``(j, a, b)``: the first axis, from the right (as ``-j``), where operands ``a`` and ``b`` of a
        broadcast both have more than one entry and names of different roles, or of two directions of
        one grid (rows against columns: SAM's decomposed biases). ``operands``: each
        operand's ``(labels, shape)``. Only names with known roles count (never sizes)."""
        return _first_clash(self, operands)

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
            return _joined_role([self.role(p) for p in self.decompositions[root][0]])
        parts = [n for n in base_names(root) if not n.isdigit()]
        if parts == [root]:
            return None   # a name with no declared role
        return _joined_role([self.role(n) for n in parts])

    def is_token_root(self, root: str) -> bool:
        return self.role(root) in TOKEN_ROLES

    # -- sizes -------------------------------------------------------------
    def size_of(self, name: str) -> int | None:
        if name in self.dims:
            return self.dims[name]
        if name in STACK_FACTORS:
            return STACK_FACTORS[name]
        if name in self.sum_sizes:
            return self.sum_sizes[name]
        for parts in self.decompositions.get(name, ()):
            if all(self.size_of(p) for p in parts):
                return math.prod(self.size_of(p) for p in parts)  # type: ignore[misc]
        return None

    def clashed(self, atom: Atom) -> bool:
        """Is this piece named differently by two factorings of its root (``H = 3`` and ``qkv``)?"""
        return (atom.stride, atom.size) in self._clashes.get(atom.root, ())

    def decide(self, atom: Atom, name: str) -> bool:
        """A use proved what a clashed piece is (the axis a fused projection is unbound along into
        its 3 parts is ``qkv``): keep only the factorings of its root that call it ``name``, for the
        whole trace. False when none does, or the choice leaves nothing (nothing is changed). The root
        is noted in :attr:`relabelled` where a label already read its pieces (:attr:`read`), or the
        choice changes its size or role: only then may a label read before the decision differ from
        one read after it. (:meth:`clashed`, the question that leads here, is no label.)"""
        root, key = atom.root, (atom.stride, atom.size)
        kept = [parts for parts in self.decompositions.get(root, ()) if _leaf_table(self, parts).get(key) == name]
        if not kept or len(kept) == len(self.decompositions[root]):
            return False
        before = self.size_of(root), self.role(root)
        self.decompositions[root] = kept
        if root in self.read or (self.size_of(root), self.role(root)) != before:
            self.relabelled.add(root)   # a label read before now may read otherwise
        self._clashes.pop(root, None)
        self._sub_names[root] = _merged_table(self, root)
        self.decided[root] = name
        self.forget_labels()
        return True

    def forget_labels(self) -> None:
        """Drop every remembered label, dims tuple and mixing verdict (the names changed)."""
        for cache in ("_label_cache", "_dims_cache", "_mix_cache"):
            self.__dict__.pop(cache, None)

    def feature_root_for_size(self, size: int, fused: bool = True) -> str | None:
        """The feature root a projection of this width produces (D, 3*D, 2*D, D_kv, H*d_k...).

        Only a unique match counts: when two roots have this width, none is chosen. A grouped-query
        q/k/v projection fused in one (``(H + 2·H_kv)·d_k``: Phi-3's ``qkv_proj``, GPTBigCode's
        ``c_attn``, Falcon's new architecture) is the sum ``D+2*D_kv``, never another root of the same
        width: at ``H = 2·H_kv`` it equals ``2·D``, whose split into ``(2, H, d_k)`` would name the axis
        of each group's q, k and v parts ``H``. Slices of the sum at its parts' bounds name the parts
        (:func:`sliced`), a view only pieces of it. ``fused=False``: the other reading (.infer.widths)."""
        found = _fused_heads_root(self, size) if fused else None
        if found is not None:
            return found or None
        hits = list(dict.fromkeys(self.aliases.get(n, n) for n in FEATURE_WIDTHS if self.size_of(n) == size))
        if self.width_clashes(size) or narrower_query_heads(self, size):
            return None
        for declared in ("H*d_k", "D", "D_kv"):   # a width made of declared names wins over a fused reading
            if len(hits) > 1 and declared in hits:
                return declared
        return hits[0] if len(hits) == 1 else None

    def width_clashes(self, size: int) -> bool:
        """Is ``size`` both the model's width D and the key/value heads' width H_kv·d_k of fewer heads than
        H? Only where a head's width is set apart from D / H (Gemma's head_dim): then a projection of that
        width may make either, and neither name is proven."""
        return self.size_of("D") == self.size_of("D_kv") == size and self.size_of("H_kv") != self.size_of("H")

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
        self.read.add(atom.root)
        known = self._sub_names.get(atom.root, {}).get((atom.stride, atom.size))
        if known:
            return self.aliases.get(known, known)
        if (atom.stride, atom.size) in self._clashes.get(atom.root, ()):
            return UNKNOWN   # H = 3 against the 3 of qkv: either name may be wrong, so neither is shown
        if atom.root in FUSED_HEAD_ROOTS:
            return UNKNOWN   # a block of q, k and v widths by stride says nothing (Falcon's groups of n_rep + 2)
        if any(n in OWN_WIDTHS for n in base_names(atom.root)):
            return UNKNOWN   # a piece of a width a projection made (``F``) or an input's (``F_in``) says nothing
        return piece_of_named(self, atom) or piece_label(atom)

    def labels(self, axis: Axis) -> list[str]:
        atoms = coalesce(axis.atoms)
        labels = self._compose([self.atom_label(a) for a in atoms], [a.size for a in atoms])
        if self.__dict__.get("_sequences_swapped"):
            labels = [_SEQUENCE_WORD.sub(lambda m: "S" if m.group(0) == "T" else "T", lab) for lab in labels]
        return labels

    def swap_sequences(self) -> None:
        """Show the two token axes the other way round: ``T`` for what entered as ``S``, and back.
        Only for equal lengths, once the run has shown which one queries the other (the tracer decides)."""
        self._sequences_swapped = True
        self.forget_labels()

    def _compose(self, labels: list[str], sizes: list[int]) -> list[str]:
        """Replace runs of labels that spell a known product (H, d_k -> D). A run whose sizes multiply to
        another size than the product's is not it: a strided conv's grid ``Hp, Wp`` of 4 × 4, flattened,
        is 16 positions, never the declared ``N = 64`` (PVT's shortened keys). Sizes only ever take a
        name away here, never give one."""
        changed = True
        while changed and len(labels) > 1:
            changed = False
            for root, alternatives in self.decompositions.items():
                for parts in alternatives:
                    n = len(parts)
                    hit = next((i for i in range(len(labels) - n + 1) if tuple(labels[i:i + n]) == parts
                                and _spells(self, root, sizes[i:i + n])), None)
                    if hit is not None:
                        self.read.add(root)
                        labels = labels[:hit] + [root] + labels[hit + n:]
                        sizes = sizes[:hit] + [math.prod(sizes[hit:hit + n])] + sizes[hit + n:]
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
        joined = "*".join(_factor(lab.lstrip(MIXED_PREFIX)) for lab in labels)
        mixed = self.mix_kind(axis) == "error" or any(lab.startswith(MIXED_PREFIX) for lab in labels if lab != "?")
        return MIXED_PREFIX + joined if mixed else joined

    def mix_kind(self, axis: Axis) -> str | None:
        """``"error"`` if the axis regroups pieces of tokens/batch with anything else, ``"warning"`` if whole token
        axes are flattened together with features, ``"note"`` for an unusual split or order of features only, else
        None (memoised per axis: it reads only the axis and this namer's fixed sizes and roles)."""
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
            return "note" if _only_features(self, atoms) else None   # pixels or unknown axes: nothing known
        labels = self._compose([self.atom_label(a) for a in atoms], [a.size for a in atoms])
        token_atoms = [a for a in atoms if self.is_token_root(a.root)]
        if token_atoms and len(token_atoms) == len(atoms):
            pieces = any(not a.whole for a in atoms)
            batched = any(self.role(a.root) == Role.BATCH for a in atoms)
            # B·nW (Swin's windows batched with the batch): a note; pieces of tokens alone (Hp/2 and Hp%2,
            # chunks of T) are a plain split: nothing to say; attention checks the use either way
            return "windows" if pieces and batched else None
        if _windows_with_heads(self, atoms, token_atoms):
            return "windows"   # (B·nW)·H: SAM's reshape(B * heads, h * w, -1) of batched windows, as B·H
        if token_atoms and len(atoms) > 1:
            if merges_neighbours(atoms, self):
                return None   # neighbouring patches' features side by side: Swin's patch merging
            if any(not a.whole for a in token_atoms):
                return "error"  # pieces of tokens regrouped with something else
            if _piece_beside(self, labels, token_atoms) and any(self.role(a.root) == "tokens" for a in token_atoms):
                return "error"  # tokens regrouped with an unnamed slice of features (batch with one is B·H-like)
            if any(self.role(a.root) == "tokens" for a in token_atoms) and len(token_atoms) < len(atoms):
                return "warning"  # whole tokens flattened together with features (B*H is fine)
        if reorders_one_root(atoms) and atoms[0].root != UNKNOWN or any(   # (D's features reordered: d_k·H)
                is_piece_label(lab) and not _inside_named(self, a) and self.role(a.root) != Role.HEAD_FEATURES
                for a, lab in zip(atoms, labels) if not self.is_token_root(a.root) and a.root != UNKNOWN):
            return "note"   # (pieces within one head's features, RoPE's (d_k/2, 2), are not a head split)
        return None

    def leaves(self, atom: Atom) -> tuple[Atom, ...]:
        """A whole atom cut into its known named parts (``D`` -> ``H``, ``d_k``)."""
        table = self._sub_names.get(atom.root)
        if not atom.whole or not table:
            return (atom,)
        self.read.add(atom.root)
        leaf_keys = [k for k in table if not any(  # keep the pieces with no named piece inside
            o != k and k[0] <= o[0] and o[0] * o[1] <= k[0] * k[1] for o in table)]
        parts, covered = [], 1
        for stride, size in sorted(leaf_keys, key=lambda k: -k[0]):
            parts.append(Atom(atom.root, atom.root_size, stride, size))
            covered *= size
        return tuple(parts) if covered == atom.root_size else (atom,)



def _sum_sizes(dims: dict[str, int], decompositions: dict) -> dict[str, int | None]:
    """The sizes of the sums that name a part of a factoring."""
    return {part: _sum_size(dims, part) for ways in decompositions.values() for parts in ways for part in parts
            if "+" in part}


def _sum_size(dims: dict[str, int], name: str) -> int | None:
    """The size of a sum of declared names and counts (``H+2*H_kv``), or None."""
    total = 0
    for term in name.split("+"):
        count, _, part = term.rpartition("*") if "*" in term else ("1", "", term)
        size = int(part) if part.isdigit() else dims.get(part)
        if size is None or not count.isdigit():
            return None
        total += int(count) * size
    return total


def _fused_heads_root(namer: Namer, size: int) -> str | None:
    """The root of a fused q/k/v width of whole heads of this size ("" where that width is not named), or
    None where ``size`` is no such width."""
    if size == _fused_mqa_width(namer) and _fused_mqa_root(namer):
        return _fused_mqa_root(namer)
    if size != _fused_grouped_qkv_width(namer):
        return None
    if namer.size_of("D") == namer.size_of("H") * namer.size_of("d_k"):
        return GROUPED_QKV
    return "" if namer.derived_head_width else NARROW_GROUPED_QKV   # a use must prove it (.infer.widths)


def _fused_mqa_root(namer: Namer) -> str | None:
    """The multi-query fused width's root (H_kv not declared), where the sizes make no other reading of
    it: at H = 2, (H + 2)·d_k is 2·D as well (k and v side by side), and neither is chosen."""
    root = next((r for r in (MQA_QKV, NARROW_MQA_QKV) if r in namer.decompositions), None)
    size = namer.size_of(root) if root else None
    others = [n for n in ("D", "3*D", "2*D", "D_kv", "2*D_kv", "H*d_k", "3*H*d_k", "2*H*d_k", "2*d_k")
              if namer.size_of(n) == size]
    return root if root and not others else None


def _fused_mqa_width(namer: Namer) -> int | None:
    root = next((r for r in (MQA_QKV, NARROW_MQA_QKV) if r in namer.decompositions), None)
    return namer.size_of(root) if root and namer.size_of("H") != 1 else None


def _fused_grouped_qkv_width(namer: Namer) -> int | None:
    heads, kv_heads, d_k = namer.size_of("H"), namer.size_of("H_kv"), namer.size_of("d_k")
    if heads is None or kv_heads is None or d_k is None or kv_heads == heads:
        return None
    return (heads + 2 * kv_heads) * d_k


def _first_clash(namer: Namer, operands) -> tuple[int, int, int] | None:
    n = max((len(shape) for _, shape in operands), default=0)
    for j in range(1, n + 1):
        named = [(i, labels[-j]) for i, (labels, shape) in enumerate(operands)
                 if j <= len(shape) and shape[-j] > 1 and namer.plain_role(labels[-j])]
        for (ia, la), (ib, lb) in zip(named, named[1:]):
            if piece_role(namer, la) != piece_role(namer, lb) or _crosses_grid(la, lb) or _reordered_join(la, lb):
                return j, ia, ib
        folds = [(i, labels[-j]) for i, (labels, shape) in enumerate(operands)
                 if j <= len(shape) and shape[-j] > 1 and fold_roles(namer, labels[-j])]
        for (ia, la), (ib, lb) in ((x, y) for x in named for y in folds):
            if namer.plain_role(la) in ROLES.values() and namer.plain_role(la) not in fold_roles(namer, lb):
                return j, min(ia, ib), max(ia, ib)
    return None


def fold_roles(namer: Namer, label: str | None) -> tuple[str, ...]:
    """The roles of the parts of a fold of plain names that has no one role of its own (``B*H``: batch, heads),
    else ``()``. Entry i of such a fold is one entry of each part: never entry i of a name of a role no part has
    (a ``T`` lined up with ``B*H`` by broadcasting pairs queries with batch-and-head pairs)."""
    if not label or "*" not in label or namer.plain_role(label) is not None or any(c in label for c in "()+[%/"):
        return ()
    roles = tuple(namer.plain_role(part) for part in label.split("*"))
    return roles if None not in roles and all(r in ROLES.values() for r in roles) else ()


def _reordered_join(a: str, b: str) -> bool:
    """Two joins of the same parts in another order (``3+T`` against ``T+3``: Idefics2's padding mask extended
    with the latents' ones in front, against keys that put the latents behind the context): entry i of one is
    another part's entry than entry i of the other."""
    parts_a, parts_b = a.split("+"), b.split("+")
    return len(parts_a) > 1 and parts_a != parts_b and sorted(parts_a) == sorted(parts_b)


def _factor(label: str) -> str:
    """A label as a factor of a product: a sum in parentheses (ConvBERT's ``cat`` of attention and conv heads,
    ``H+H``, times ``d_k`` is ``(H+H)*d_k``; written ``H+H*d_k`` it read as 4 + 32)."""
    depth = 0
    for ch in label:
        depth += (ch == "(") - (ch == ")")
        if ch == "+" and depth == 0:
            return f"({label})"
    return label


def piece_role(namer: Namer, label: str) -> str | None:
    """The role of ``label``; for unnamed pieces of a root (``D%4``, ``D/4%2``, ``D%4+D%4``: the
    halves of OLMo's ``rotate_half``) that all lie within one named piece (``d_k``), that piece's role."""
    terms = label.split("+") if is_piece_label(label) else []
    inside = {_role_around(namer, t) for t in terms}
    return inside.pop() if len(inside) == 1 and None not in inside else namer.role(label)


def _role_around(namer: Namer, term: str) -> str | None:
    """The role of the named piece of its root that the piece label ``term`` lies in, or None."""
    found = re.fullmatch(r"(\w+)(?:/(\d+))?(?:%(\d+))?", term)
    root_size = namer.size_of(found.group(1)) if found else None
    if not root_size:
        return None
    stride = int(found.group(2) or 1)
    size = int(found.group(3) or root_size // stride)
    namer.read.add(found.group(1))
    return next((namer.role(name) for (s, n), name in namer._sub_names.get(found.group(1), {}).items()
                 if s <= stride and stride * size <= s * n and stride % s == 0), None)


def _crosses_grid(a: str, b: str) -> bool:
    """Are ``a`` and ``b`` (or pieces of them) two different directions of one grid (``Hp%2``, ``Wp%2``)?"""
    ra, rb = base_names(a), base_names(b)
    return len(ra) == len(rb) == 1 and ra[0] != rb[0] and ra[0] in GRID_AXES and rb[0] in GRID_AXES


def _windows_with_heads(namer: Namer, atoms: Sequence[Atom], token_atoms: Sequence[Atom]) -> bool:
    """Is the axis windows (the major pieces of token axes: which window, ``Hp/2``), with or without
    whole batch entries, folded with the heads (an atom named H, whole or the heads' piece of a fused
    projection) and nothing else? Each entry is one (batch entry, window, head): the tokens inside each
    window stay on the other axes, as B·H keeps them. The batch is not asked for: at B = 1 its axis of
    one entry is left out of every fold and says nothing either way (SAM's encoder on one image)."""
    rest = [a for a in atoms if a not in token_atoms]
    pieces = [a for a in token_atoms if not a.whole]
    return (bool(rest) and bool(pieces) and all(_window_index(a) for a in pieces)
            and all(a in pieces or (namer.role(a.root) == Role.BATCH and a.whole) for a in token_atoms)
            and all(namer.role(namer.atom_label(a) or "?") == Role.HEADS for a in rest))


def _window_index(atom: Atom) -> bool:
    """Is the piece which block of its root (``Hp/2``: the major digits), not a place inside one?"""
    return atom.stride > 1 and atom.stride * atom.size == atom.root_size


def _only_features(namer: Namer, atoms: Sequence[Atom]) -> bool:
    """Are the pieces mixed here all features, heads or head features (a split of D)?"""
    names = [_root_of_label(name) for a in atoms for name in base_names(a.root)]
    return bool(names) and all(namer.role(n) in (Role.FEATURES, Role.HEADS, Role.HEAD_FEATURES, "stack")
                               for n in names)


def _inside_named(namer: Namer, atom: Atom) -> bool:
    """Does this unnamed piece lie within one named piece of its root (a piece of ``d_k``)?"""
    namer.read.add(atom.root)
    return any(stride <= atom.stride and atom.stride * atom.size <= stride * size
               and (atom.stride - stride) % stride == 0
               for (stride, size) in namer._sub_names.get(atom.root, {}))


def _spells(namer: Namer, root: str, sizes: list[int]) -> bool:
    """Can pieces of these sizes be ``root``? (a root of unknown size: yes)"""
    size = namer.size_of(root)
    return size is None or size == math.prod(sizes)


def piece_of_named(namer: Namer, atom: Atom) -> str | None:
    """An unnamed piece that lies within one named piece of its root above the root's last digits,
    said in that name: where D = H·d_k, ``D/12`` (D = 48, d_k = 6) is ``H/2`` and ``D/6%2`` is ``H%2``.
    The finest such piece that holds it whole (its digits inside that piece's) is chosen; None when
    none does. A piece at the root's end (``D%8``) keeps the root's name: nothing is divided out;
    except in a grid of tokens (N = Hp·Wp), whose last row is a place too: a window's column ``Wp%2``
    and the windows along it ``Wp/2`` (Swin's windows), never ``N%2`` and ``N/2%3``."""
    best = None
    for (stride, size), name in namer._sub_names.get(atom.root, {}).items():
        if (stride == 1 and not namer.is_token_root(name)) or atom.stride % stride or \
                size % (atom.stride // stride * atom.size):
            continue
        if best is None or size < best[1]:
            best = (stride, size, name)
    if best is None or (best[0], best[1]) == (atom.stride, atom.size):
        return None
    stride, size, name = best
    return piece_label(Atom(namer.aliases.get(name, name), size, atom.stride // stride, atom.size))


def _joined_role(roles: list[str | None]) -> str | None:
    """The role of a product: one shared role, or features for heads × head features (D = H·d_k)."""
    kept = {r for r in roles if r not in ("stack", COPIES)}
    if kept == {"heads", "head_features"} or kept == {"features", "heads"}:
        return "features"
    return kept.pop() if len(kept) == 1 else None


# -- the tables of named pieces of each root (stride, size) -> name: built once, when a Namer is made
def _merged_table(namer: Namer, root: str) -> dict[tuple[int, int], str]:
    """Named pieces of ``root`` under every way it can factor; a piece two ways name differently
    (``H = 3`` against the 3 of ``qkv``) is left unnamed: it cannot be told apart."""
    merged: dict[tuple[int, int], str] = {}
    clashes: set[tuple[int, int]] = set()
    for parts in namer.decompositions[root]:
        for key, name in _leaf_table(namer, parts).items():
            if merged.get(key, name) != name:
                clashes.add(key)
            merged.setdefault(key, name)
    if clashes:
        namer._clashes.setdefault(root, set()).update(clashes)
    return {k: v for k, v in merged.items() if k not in clashes}

def _leaf_table(namer: Namer, parts: tuple[str, ...]) -> dict[tuple[int, int], str]:
    """(stride, size) -> name for every named piece of a root, recursively."""
    table: dict[tuple[int, int], str] = {}
    stride = 1
    for part in reversed(parts):
        size = namer.size_of(part)
        if size is None:
            return {}
        table[(stride, size)] = part
        for (sub_stride, sub_size), sub_name in _sub_table(namer, part).items():
            table.setdefault((stride * sub_stride, sub_size), sub_name)
        stride *= size
    return table

def _sub_table(namer: Namer, name: str) -> dict[tuple[int, int], str]:
    return _merged_table(namer, name) if name in namer.decompositions else {}


def _piece_beside(namer: Namer, labels, token_atoms) -> bool:
    """Is one of ``labels`` a piece (``D/8``) other than a whole token axis's own label (the patches ``T/P`` a
    patch embedding made whole, :func:`.axis_compute.linear_axes`: tokens, no piece of features)?"""
    own = {namer.atom_label(a) for a in token_atoms}
    return any(is_piece_label(lab) and lab not in own for lab in labels)
