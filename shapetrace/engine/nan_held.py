"""Attention weights that held all-NaN rows at their call, and whether the code itself cleared them.

A query with every key masked makes a softmax row ``0 / 0``: NaN. Code that expects it (TransformerLens'
``torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)``, a ``masked_fill`` of those
rows, ``nan_to_num``) replaces the NaN before the weights are used: its output holds none, and the
``nan-rows`` error ("the NaN then spreads into the output") would be false. So, from the call on, each op
that reads a held tensor is screened by its values (one ``isnan().any()``, on the rare run that has NaN
rows at all):

- an output of the held tensor's shape that still holds NaN (dropout, a scale) carries the rows: held too;
- a floating output of another shape with NaN (the product with the values) spreads them;
- a floating elementwise or mask-fill output of the held tensor's shape with no NaN is a clearing.

The weights count as cleared where some op cleared them (or a carrier of them) and none spread them.
Engine code: plain data, no Rich.
"""

from __future__ import annotations

import torch

from shapetrace.engine.opspec import Family

#: the families whose ops read every value of their operand elementwise (``torch.where``, ``masked_fill``)
_CLEARING = frozenset({Family.ELEMENTWISE, Family.MASK_FILL})


class NanHeld:
    """Per capture: held nodes (the softmax/SDPA record whose rows they carry), and what became of them."""

    def __init__(self) -> None:
        self.nodes: dict[int, int] = {}     # node -> the record of the attention output whose NaN rows it holds
        self._cleared: set[int] = set()
        self._spread: set[int] = set()

    def hold(self, node: int, record: int) -> None:
        self.nodes[node] = record

    def read_by(self, spec, nodes, in_raw, out: torch.Tensor, out_node: int) -> None:
        """One op that read ``nodes`` (its operands, ``in_raw`` their layouts) and made ``out``."""
        for node, raw in zip(nodes, in_raw):
            record = self.nodes.get(node)
            if record is None or not out.is_floating_point() or out.is_meta:
                continue
            same = tuple(out.shape) == tuple(raw[0])
            if bool(torch.isnan(out).any()):
                if same:
                    self.nodes.setdefault(out_node, record)
                else:
                    self._spread.add(record)
            elif same and spec.family in _CLEARING:
                self._cleared.add(record)

    def cleared(self) -> frozenset[int]:
        """The records of attention outputs whose NaN rows the code replaced before any use spread them."""
        return frozenset(self._cleared - self._spread)
