"""A table indexed by a constant buffer whose shape happens to fit the declared sizes (issue 33: equal
sizes never decide a name). At B = T = 4 a window's ``[T, T]`` relative-position index enters the
traced code as ``[B, T]`` or ``[T, B]``, a guess by size alone; the pick ``table[index]`` must not take
those names (element provenance hands an index's names on only when they are proven:
``shapetrace.engine.infer.guesses``). Before, Swin's bias came out ``[1, H, B, T]`` and its addition
to the scores was a false ``✗ broadcast-mismatch``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace


class WindowBias(nn.Module):
    """microsoft/Swin-Transformer ``WindowAttention`` (timm's ``swin_transformer.py`` the same): a
    learned ``[(2W-1)², H]`` table indexed by the registered ``relative_position_index`` of the window's
    ``[N, N]`` token pairs, ``permute(2, 0, 1)`` to ``[H, N, N]`` and added to the scores. ``flat``:
    indexed through ``view(-1)`` as Swin does, else with the 2-D index directly."""

    def __init__(self, dim: int, heads: int, window: int, flat: bool):
        super().__init__()
        self.heads, self.flat = heads, flat
        self.table = nn.Parameter(torch.randn((2 * window - 1), heads))
        pos = torch.arange(window)
        self.register_buffer("relative_position_index", pos[:, None] - pos[None, :] + window - 1)  # (N, N)
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)  # (3, B, H, N, d_k)
        attn = q @ k.transpose(-2, -1) / (C // self.heads) ** 0.5  # (B, H, N, N)
        if self.flat:
            bias = self.table[self.relative_position_index.view(-1)].view(N, N, -1)  # (N, N, H)
        else:
            bias = self.table[self.relative_position_index]  # (N, N, H)
        attn = attn + bias.permute(2, 0, 1).unsqueeze(0)  # (B, H, N, N)
        return (attn.softmax(-1) @ v).transpose(1, 2).reshape(B, N, C)  # (B, N, C)


@pytest.mark.parametrize("flat", [True, False], ids=["view(-1)", "2-d index"])
@pytest.mark.parametrize("dims", ["B=4 T=4 D=32 H=4", "B=2 T=4 D=32 H=4", "B=4 T=4 D=16 H=2"])
def test_a_constant_index_named_by_size_hands_no_name_to_what_it_picks(flat, dims):
    sizes = dict(kv.split("=") for kv in dims.split())
    torch.manual_seed(0)
    model = WindowBias(int(sizes["D"]), int(sizes["H"]), int(sizes["T"]), flat).eval()
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(torch.randn(int(sizes["B"]), int(sizes["T"]), int(sizes["D"])))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    picked = [e.outputs[0].dims for e in t.events if e.op == "__getitem__" and "table[" in e.code]
    # no name rather than a guess; the table's last axis meets the scores' heads, and is named so where no
    # other axis of the scores has H entries (through the 2-d index: the flat index's view is not walked back)
    heads = "H" if sizes["H"] not in (sizes["B"], sizes["T"]) else None
    assert picked == [(None, None) if flat else (None, None, heads)]
