"""infer/backward.py (``_bias_heads``) and rules/tables.py: a bias made from parameters only (a
relative-position table) is named where it meets the scores ``[B, H, T, S]``: its axis added along the
heads is the heads, carried back through the ops that made it, but only where no other axis of the
scores has H entries (at B = T = H = 4 nothing is named). A view that cuts that axis across the
table's own axes (``view`` where ``permute`` was meant) is ``mixed-axis``; a table read straight from a
parameter may be laid out any way (its values are learned) and is left alone.

Styles: microsoft/Swin-Transformer ``WindowAttention`` (``relative_position_bias_table[index.view(-1)]
.view(N, N, -1).permute(2, 0, 1)``), huggingface/transformers ``T5Attention.compute_bias``
(``relative_attention_bias(buckets)`` ``[T, S, H]`` then ``.permute([2, 0, 1]).unsqueeze(0)``)."""

from __future__ import annotations

import pytest
import torch

import shapetrace


class RelativeBias(torch.nn.Module):
    """Scores ``[B, H, N, N]`` of windows of ``wh`` × ``ww`` tokens plus a relative-position bias."""

    def __init__(self, H: int, wh: int, ww: int, style: str, bug: str = ""):
        super().__init__()
        self.H, self.N, self.style, self.bug = H, wh * ww, style, bug
        coords = torch.stack(torch.meshgrid(torch.arange(wh), torch.arange(ww), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)          # (N, N, 2)
        self.register_buffer("index", (rel[..., 0] + wh - 1) * (2 * ww - 1) + rel[..., 1] + ww - 1)
        self.table = torch.nn.Parameter(torch.randn((2 * wh - 1) * (2 * ww - 1), H))   # Swin: (L, H)
        self.embed = torch.nn.Embedding((2 * wh - 1) * (2 * ww - 1), H)                 # T5: buckets -> H
        self.learned = torch.nn.Parameter(torch.randn(self.N, self.N, H))             # a free table

    def bias(self) -> torch.Tensor:
        N, H = self.N, self.H
        if self.style == "swin":
            table = self.table[self.index.view(-1)].view(N, N, -1)                  # (N, N, H)
        elif self.style == "t5":
            table = self.embed(self.index)                                           # (N, N, H)
        else:
            table = self.learned                                                     # (N, N, H), learned
        if self.bug:
            return table.contiguous().view(1, H, N, N)                               # heads cut across
        return table.permute(2, 0, 1).contiguous().unsqueeze(0)                      # (1, H, N, N)

    def forward(self, q, k):
        scores = q @ k.transpose(-2, -1)                                             # (B, H, N, N)
        return (scores + self.bias()).softmax(dim=-1)


def traced(style: str, bug: str, B: int, H: int, wh: int, ww: int):
    torch.manual_seed(0)
    model, N = RelativeBias(H, wh, ww, style, bug), wh * ww
    q, k = torch.randn(B, H, N, 8), torch.randn(B, H, N, 8)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} H={H} T={N} d_k=8") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(k, "B H T d_k")
        model(q, k)
    return t


def found(t) -> list[tuple[str, str, int]]:
    return [(d.severity, d.kind, d.event) for d in t.diagnostics]


@pytest.mark.parametrize("style,view", [("swin", 6), ("t5", 4)])
def test_a_computed_table_viewed_onto_the_heads_without_its_permute_is_mixed_axis(style, view):
    """The table's rows are picked by relative position (Swin) or looked up by bucket (T5): read
    ``[6, 6, 4]`` as ``[4, 6, 6]``, each head's entries are pieces of several positions and heads.
    f3b2c69: no finding, ``?``."""
    t = traced(style, "view", B=2, H=4, wh=2, ww=3)
    assert found(t) == [("error", "mixed-axis", view)]
    assert t.diagnostics[0].message == (
        f"view #{view} turns the table [6, 6, 4] into [1, H=4, 6, 6]: axis 1 is added along the heads of the "
        "scores later, but this view cuts it across the table's axes, so each of its 4 entries holds pieces of "
        "several rows and columns of the table (heads mixed with positions). Torch sees the same number of "
        "elements and says nothing.")
    assert t.diagnostics[0].fix.startswith("Move the table's heads axis into place with a permute")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize("style", ["swin", "t5"])
def test_the_permuted_table_is_named_heads_back_to_where_it_was_made(style):
    t = traced(style, "", B=2, H=4, wh=2, ww=3)
    assert found(t) == []
    permute = next(e for e in t.events if e.op == "permute")
    assert (permute.inputs[0].dims, permute.outputs[0].dims) == ((None, None, "H"), ("H", None, None))


@pytest.mark.parametrize("style", ["swin", "learned"])
@pytest.mark.parametrize("bug", ["", "view"])
def test_at_b_t_h_4_nothing_is_named_from_the_bias(style, bug):
    """Windows of 2 × 2: the table is [4, 4, 4] and the view is the identity; which of its axes holds
    the heads is not known, so no name and no finding (the verdict stays ``?``). (T5's style is left
    out here: its index buffer [4, 4] is seeded ``[B, H]`` by size, which is another matter.)"""
    t = traced(style, bug, B=4, H=4, wh=2, ww=2)
    assert "mixed-axis" not in [d.kind for d in t.diagnostics]
    assert all("H" not in e.outputs[0].dims for e in t.events if e.op in ("view", "permute", "embedding"))
    assert t.report().verdict.mark == "?"


def test_a_learned_table_read_in_any_layout_is_left_alone():
    """A free parameter ``[N, N, H]`` viewed ``[1, H, N, N]``: the values are learned in whatever layout
    is read, so nothing is mixed (no index picked its rows, nothing computed it)."""
    t = traced("learned", "view", B=2, H=4, wh=2, ww=3)
    assert "mixed-axis" not in [d.kind for d in t.diagnostics]
    assert t.report().verdict.mark != "✗"
