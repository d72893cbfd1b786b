"""Rotary tables built from positions given per batch entry (``position_ids`` of shape ``[B, T]``, a left-padded
row's offset by its padding, as ``generate()`` counts them with ``mask.cumsum(-1) - 1``): their angles change along
the batch as well as along the tokens, and the ops that built them are checked on the values where every batch
entry's angles turn along its tokens (engine/value_checked, rotary_positions.turns_in_every_entry).

lib18: transformers' Llama, Mistral, Qwen2, Gemma 2, Phi-3, GPT-NeoX and Falcon fed a left-padded batch left the
rotary table's ``cat`` and ``unsqueeze`` unchecked (3 ops each); the same models fed one row of positions were
``✓``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace

B, T, D, H = 2, 5, 16, 2
DIMS = {"B": B, "T": T, "D": D, "H": H}


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class RotaryAttention(nn.Module):
    """Llama's rotary attention, its positions handed in (one row, or one per batch entry)."""

    def __init__(self):
        super().__init__()
        d = D // H
        self.q, self.k, self.v, self.o = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, d, 2).float() / d), persistent=False)

    def forward(self, x, positions):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, H, -1).transpose(1, 2)                      # (B, H, T, d_k)
        k = self.k(x).view(b, t, H, -1).transpose(1, 2)                      # (B, H, T, d_k)
        v = self.v(x).view(b, t, H, -1).transpose(1, 2)                      # (B, H, T, d_k)
        freqs = positions[..., None].float() * self.inv_freq                 # (B, T, d_k/2)
        emb = torch.cat((freqs, freqs), dim=-1)                              # (B, T, d_k)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)            # (B, 1, T, d_k)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        w = (q @ k.transpose(-2, -1) / (D // H) ** 0.5).softmax(-1)          # (B, H, T, T)
        return self.o((w @ v).transpose(1, 2).reshape(b, t, D))              # (B, T, D)


def _mask():
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, :2] = 0                                                          # the second row left-padded
    return mask


POSITIONS = {
    "one-row": lambda: torch.arange(T)[None],                                # (1, T)
    "left-padded": lambda: (_mask().cumsum(-1) - 1).clamp(min=0),            # (B, T): the second row offset
    "counted-over-the-batch": lambda: (_mask().cumsum(0) - 1).clamp(min=0),  # (B, T): the first row all 0
}


def _verdict(kind):
    torch.manual_seed(0)
    model, x = RotaryAttention().eval(), torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=DIMS, dependencies=True) as t:
        model(x, POSITIONS[kind]())
    return t.report().verdict.line


@pytest.mark.parametrize("kind", ["one-row", "left-padded"])
def test_positions_per_batch_entry_check_the_rotary_table(kind):
    """left-padded fails on main 51f5266 (``? checked 24 of 27 ops``: the table's cat and unsqueezes unnamed)."""
    assert _verdict(kind)[0] == "✓", _verdict(kind)


def test_positions_counted_over_the_batch_are_not_checked():
    """The twin: positions counted down the batch (``cumsum(0)``) leave the first row's tokens all at one angle."""
    assert _verdict("counted-over-the-batch")[0] != "✓"
