"""A rotary's pairing against the pairing the model declares, and a rotary whose input is sliced twice.

* ``rotary-pairing-declared``: vllm-project/vllm-ascend pull request #12820 (a GPT-J style model rotated by halves
  whatever its ``is_neox_style``). The flags read are vLLM's ``is_neox_style``, flash-attn's and Transformer
  Engine's ``interleaved`` and Megatron's ``config.rotary_interleaved`` (shapetrace/engine/modules.py
  ``PAIRING_FLAGS``); the nearest module around the rotation that holds one decides.
* flash-attn's ``apply_rotary_emb_torch`` writes ``x[..., :ro_dim] * cos + rotate_half(x[..., :ro_dim]) * sin``:
  the slice is taken twice, and before shapetrace/engine/same_moves.py the rotary was not found at all (so neither
  a table laid out for the other pairing nor a declared pairing was checked).
Each test fails on 03e5a70.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from shapetrace import trace
from tests.corpus.public51 import flash_rotary_flag, megatron_rotary_config


def _halves(x):
    x1, x2 = x.chunk(2, dim=-1)                                                      # (..., d/2) each
    return torch.cat((-x2, x1), dim=-1)                                              # (..., d)


def _pairs(x):
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)             # (..., d)


class Rotary(nn.Module):
    """flash-attn's torch fallback: the rotated slice taken twice, the table grown to the rotary width."""

    def __init__(self, d, table, rotate, **flags):
        super().__init__()
        self.table, self.rotate = table, rotate
        self.__dict__.update(flags)
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, d, 2).float() / d), persistent=False)

    def forward(self, x):                                                            # (B, T, H, d)
        freqs = torch.outer(torch.arange(x.shape[1]).float(), self.inv_freq)         # (T, d/2)
        if self.table == "halves":
            freqs = torch.cat((freqs, freqs), dim=-1)                                # (T, d)
        else:
            freqs = freqs.repeat_interleave(2, dim=-1)                               # (T, d)
        cos, sin = freqs.cos()[:, None], freqs.sin()[:, None]                        # (T, 1, d)
        d = cos.shape[-1]
        return x[..., :d] * cos + self.rotate(x[..., :d]) * sin                      # (B, T, H, d)


class Attention(nn.Module):
    def __init__(self, rotary, heads=4, width=64):
        super().__init__()
        self.heads, self.qkv, self.rotary = heads, nn.Linear(width, 3 * width), rotary

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).unbind(2)   # (B, T, H, d_k) each
        q, k = self.rotary(q), self.rotary(k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))                             # (B, H, T, d_k) each
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)   # (B, H, T, d_k)
        return out.transpose(1, 2).reshape(B, T, D)                                  # (B, T, D)


def _kinds(model) -> list[str]:
    torch.manual_seed(0)
    with trace("B=2 T=6 D=64 H=4") as t:
        model(torch.randn(2, 6, 64))
    return [d.kind for d in t.report().diagnostics if d.severity in ("error", "warning")]


def test_a_table_laid_out_for_the_other_pairing_is_found_where_the_slice_is_taken_twice():
    """Before: no rotary found, so no finding (the interleaved table under rotate_half went unseen)."""
    assert _kinds(Attention(Rotary(16, "interleaved", _halves, interleaved=False))) == ["rotary-pairing-mismatch"]
    assert _kinds(Attention(Rotary(16, "halves", _halves, interleaved=False))) == []
    assert _kinds(Attention(Rotary(16, "interleaved", _pairs, interleaved=True))) == []


@pytest.mark.parametrize("flags,rotate,table,found", [
    ({"is_neox_style": False}, _halves, "halves", True),      # vllm-ascend #12820: GPT-J weights, halves rotation
    ({"is_neox_style": True}, _halves, "halves", False),
    ({"is_neox_style": True}, _pairs, "interleaved", True),
    ({"rotary_interleaved": False}, _pairs, "interleaved", True),
    ({"interleaved": "yes"}, _halves, "halves", False),     # (not a bool: says nothing)
])
def test_the_rotation_is_compared_with_the_pairing_its_module_declares(flags, rotate, table, found):
    kinds = _kinds(Attention(Rotary(16, table, rotate, **flags)))
    assert kinds == (["rotary-pairing-declared"] if found else [])


def test_the_nearest_declaring_module_decides():
    """The attention says halves on its config; the rotary module inside it says interleaved, and rotates so."""
    from shapetrace.engine.modules import declared_pairings  # (here: 03e5a70 has none, and the others fail there)

    class Config:
        def __init__(self):
            self.rotary_interleaved = False

    model = Attention(Rotary(16, "interleaved", _pairs, interleaved=True))
    model.config = Config()
    assert declared_pairings(model) == [("config.rotary_interleaved", "halves")]
    assert declared_pairings(model.rotary) == [("interleaved", "interleaved")]
    assert _kinds(model) == []


def test_the_finding_says_which_flag_and_how_to_rotate():
    model, inputs = megatron_rotary_config.build("config-ignored")
    with trace("B=2 T=6 D=64 H=4") as t:
        model(*inputs)
    found = [d for d in t.report().diagnostics if d.kind == "rotary-pairing-declared"]
    assert [d.severity for d in found] == ["warning"]   # (q and k: one finding, the same op again in `also`)
    assert found[0].message == (
        "cat #8 rotates features in pairs by halves (feature i with i + d/2, as rotate_half does), but "
        "config.rotary_interleaved = True says the model pairs them interleaved (feature 2k with 2k + 1). A table "
        "laid out to match turns each pair as one, so nothing else in the run disagrees; but weights trained for "
        "the declared pairing meet every feature with the wrong partner, and q·k no longer reads positions as they "
        "were learned.")
    assert found[0].fix == (
        "Rotate as config.rotary_interleaved says (rotate_every_two, torch.stack((-x[..., 1::2], x[..., ::2]), "
        "dim=-1).flatten(-2)), with its table laid out to match; or, if the flag is wrong, correct the flag.")


def test_flash_attn_style_rotary_with_its_flag_dropped_is_a_warning():
    model, inputs = flash_rotary_flag.build("flag-dropped")
    with trace("B=2 T=6 D=64 H=4") as t:
        model(*inputs)
    found = [d for d in t.report().diagnostics if d.kind == "rotary-pairing-declared"]
    assert len(found) == 1 and "rotary_emb.interleaved = True says the model pairs them interleaved" in \
        found[0].message
