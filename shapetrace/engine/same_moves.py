"""Calls that move the same elements the same way: one tensor written twice as the same expression.

flash-attn's ``apply_rotary_emb_torch`` computes ``x[..., :ro_dim] * cos + rotate_half(x[..., :ro_dim]) * sin``: the
slice is taken twice, so the tensor the rotation moves is not the node multiplied by ``cos`` but a twin of it. Two
calls are twins when they are the same op (one :class:`~.opspec.OpSpec`) on the same operand nodes (index tensors are
operands too) with the same other arguments, and only move elements (a view, or indexing): their results hold the
same elements at the same places. Plain data: record indices and nodes, never tensors.
"""

from __future__ import annotations

from shapetrace.engine.capture import OpRecord

#: the memory kinds of ops that only move elements (a view; indexing, which may copy)
_MOVES = frozenset({"view", "maybe"})


class SameMoves:
    """The twins of each node made by a move, noted call by call (:meth:`note`) and asked after (:meth:`of`)."""

    def __init__(self) -> None:
        self._made: dict[tuple, list[int]] = {}   # (spec, operand nodes, frozen arguments) -> the nodes made
        self._key: dict[int, tuple] = {}          # node -> its key

    def note(self, record) -> None:
        """Note ``record``'s result where it is a move of one result."""
        if type(record) is not OpRecord or len(record.outs) != 1 or record.spec.memory not in _MOVES \
                or record.outs[0] in record.ins:
            return
        key = (record.spec, record.ins, record.frozen)
        self._made.setdefault(key, []).append(record.outs[0])
        self._key[record.outs[0]] = key

    def of(self, node: int) -> frozenset[int]:
        """The other nodes made by the same move as ``node`` (none where it was made otherwise)."""
        key = self._key.get(node)
        return frozenset(n for n in self._made.get(key, ()) if n != node) if key is not None else frozenset()
