"""shapetrace/engine/blocks.py: names through ``F.unfold`` and ``F.fold`` (im2col and its inverse).

On d04b913 ``F.unfold`` had no names function (its output kept only the batch's name) and ``F.fold`` was not in
the registry (no names at all): VOLO's outlook attention (tests/corpus/public34/volo_outlook.py) lost its values'
heads and the grid it folds back onto. Each test below fails there, but the stride-2 guard."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import shapetrace

DIMS = "B=2 D=32 H=4 Hp=3 Wp=5"


def _names(t, op):
    return [tuple(e.outputs[0].dims) for e in t.events if e.op == op]


def _traced(x, **block):
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        shapetrace.name(x, "B D Hp Wp")
        cols = F.unfold(x, **block)
        heads = cols.reshape(2, 4, 8, 9, cols.shape[-1])                 # (B, H, d_k, 3·3, L)
        if block.get("stride", 1) == 1:
            F.fold(heads.reshape(2, 288, -1), output_size=(3, 5), **block)
    return t


def test_blocks_centred_on_each_position_are_the_grid_and_the_columns_each_channels_block():
    """A 3 x 3 block per position (stride 1, padding 1): ``L`` is ``Hp·Wp`` (``N``), the columns ``D`` outer
    and the kernel's offsets inner (unnamed), so a head split of the columns names ``H`` and ``d_k``."""
    t = _traced(torch.randn(2, 32, 3, 5), kernel_size=3, padding=1)
    assert _names(t, "F.unfold") == [("B", None, "N")]
    assert _names(t, "reshape")[0] == ("B", "H", "d_k", None, "N")


def test_fold_puts_the_channels_and_the_grid_back():
    """``F.fold`` of those columns, merged back ``(H d_k 3·3)``, onto the ``3 x 5`` grid: ``B, D, Hp, Wp``."""
    t = _traced(torch.randn(2, 32, 3, 5), kernel_size=3, padding=1)
    assert _names(t, "F.fold") == [("B", "D", "Hp", "Wp")]


def test_strided_blocks_are_another_grid_unnamed():
    """Stride 2 (``2 x 3`` blocks over the ``3 x 5`` grid): the blocks are not the positions, so neither ``L``
    nor the columns are named (a guard: NAT's unpadded neighbourhoods, tests/corpus/public8/nat_unfold.py, named
    their keys' heads apart from any token name, a false ``✗`` on correct code)."""
    t = _traced(torch.randn(2, 32, 3, 5), kernel_size=3, padding=1, stride=2)
    assert _names(t, "F.unfold") == [("B", None, None)]
    assert _names(t, "reshape")[0] == ("B", None, None, None, None)


def test_outlook_output_folded_without_its_permute_is_a_mixed_axis():
    """VOLO's slip ``(attn @ v).reshape(B, C·9, N)`` without ``permute(0, 1, 4, 3, 2)``: the columns walk across
    heads, the grid and the head's features (and the unnamed kernel offsets): ``✗ mixed-axis`` at the reshape,
    whose message names the named parts (on d04b913: ``?``, every part unnamed)."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.public34 import volo_outlook

    t = traced_build(volo_outlook, "fold-without-permute", DIMS)
    found = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in found] == ["mixed-axis"]
    assert found[0].message.startswith("reshape #16 turns [B=2, H=4, N=15, 9, d_k=8] into [B=2, !H·Hp·Wp·d_k=288, "
                                       "15]: axis 1 (size 288) holds pieces of H and Hp and Wp and d_k")
