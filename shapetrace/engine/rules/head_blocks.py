"""A part's own heads: a minor piece of heads (``H%2``) whose block axis (``H/2``) was taken away.

Reads: the labels of two operands' batch axes that a batched product lines up. Adds: nothing; it tells
:func:`~shapetrace.engine.rules.diagnose.batch_axes` that such a pair is no ``batch-mismatch``.

A projection's width cut ``(2, H/2, d_k)`` reads ``[H/2, H%2, d_k]`` where the width is heads side by side.
Picked apart by ``kv[0]``, ``kv[1]`` (or ``unbind``), each part keeps ``H%2`` and loses ``H/2``: its heads are
the heads of one block of the width, or the own heads of one of the parts the width stacks (keys, then values,
each of half the heads: Shunted attention's ``kv1(x).reshape(B, -1, 2, num_heads // 2, C // num_heads)``, mamba's
``'... (two hkv d)'``). Every size fits both readings, and the second is what the code means when it pairs such a
part with half of the query heads (``q[:, :num_heads // 2]``, ``H[0:2]``) or repeats it over the query heads
(the repeat already lines up through its copies). So a standing-alone minor piece of heads lines up with any cut
of the same heads of its size; a piece that still has its block beside it, or a piece of another width (heads cut
interleaved: ``D%2``), is judged as before.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from shapetrace.engine.vocabulary import ROLES, Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import TensorInfo

_MINOR = re.compile(r"(\w+)%\d+")
_ROOT = re.compile(r"\w+")


def part_heads_pair(a: TensorInfo, la: str, b: TensorInfo, lb: str) -> bool:
    """Do batch axes ``la`` of ``a`` and ``lb`` of ``b`` pair a part's own heads with a cut of the same heads?"""
    return _own_heads(a, la, lb) or _own_heads(b, lb, la)


def _own_heads(info: TensorInfo, label: str, other: str) -> bool:
    m = _MINOR.fullmatch(label)
    if m is None or ROLES.get(m.group(1)) != Role.HEADS:
        return False
    root = m.group(1)
    if any(d and d != label and re.match(rf"{re.escape(root)}[/%]", d) for d in info.dims):
        return False   # (its block is still beside it: which heads it holds is known)
    found = _ROOT.match(other)
    return found is not None and found.group(0) == root and other != root
