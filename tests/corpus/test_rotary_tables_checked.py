"""Rotary tables checked on their values earn the check mark (issue 33 item 1: a ``✓`` only when proven,
and correct public-style code earns it).

A rotary table's feature axis counts frequencies, which no input names, so before this every correct
file with a rotary embedding ended ``? … not checked (unnamed axes): #11 __getitem__, #12 expand…``.
Where the rotary check read both tables and found that they pair features as the rotation does, with
angles that change along the tokens, the ops that built the tables (and the rotation's data moves) are
checked on the values: the verdict is ``✓`` and says how many ops were checked that way. A table laid
out against its rotation, or positions counted along the batch, stays an error; a table made from the
data itself is not counted. Each case runs at distinct sizes and at B = T = H = d_k = 4.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace import NOT_ASKED
from tests.corpus.helpers import traced_named_input
from tests.corpus.test_rotary_positions import LlamaRotary, rotate_half

#: what a Python trace's verdict adds where nobody asked for the dependency contracts
UNASKED = f"; not measured: {NOT_ASKED}"

DIMS = "B=2 T=5 D=32 H=4"            # d_k = 8
SQUARE = "B=4 T=4 D=16 H=4"          # B = T = H = d_k = 4
SQUARE_WIDE = "B=4 T=4 D=32 H=4"     # B = T = H = 4, d_k = 8 (Phi's rotary half of d_k = 4 has 2 frequencies)


class PhiPartialRotary(nn.Module):
    """huggingface/transformers models/phi/modeling_phi.py ``PhiAttention.forward``: rotary on the first
    ``partial_rotary_factor * head_dim`` features only (``query_rot, query_pass = query_states[...,
    : self.rotary_ndims], query_states[..., self.rotary_ndims :]``), ``emb = torch.cat((freqs, freqs),
    dim=-1)`` from ``torch.outer(t, inv_freq)``, then ``torch.cat((query_rot, query_pass), dim=-1)``.
    ``interleaved=True`` builds the table GPT-J's way (``repeat_interleave(2)``) under ``rotate_half``:
    transformers issue #25199-style mix-up of the two layouts. ``from_batch=True`` counts the positions
    along the batch (``torch.arange(B)``)."""

    def __init__(self, dim: int, heads: int, interleaved: bool = False, from_batch: bool = False):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.rot, self.interleaved, self.from_batch = self.hd // 2, interleaved, from_batch
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.dense = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.rot, 2).float() / self.rot)),
                             persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.hd).transpose(1, 2)         # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, self.heads, self.hd).transpose(1, 2)         # (B, H, T, d_k)
        v = self.v_proj(x).view(B, T, self.heads, self.hd).transpose(1, 2)         # (B, H, T, d_k)
        pos = torch.arange(B if self.from_batch else T, dtype=torch.float32)       # (T,) [positions]
        freqs = torch.outer(pos, self.inv_freq)                                    # (T, rot/2)
        if self.interleaved:
            emb = freqs.repeat_interleave(2, dim=-1)                               # (T, rot)
        else:
            emb = torch.cat((freqs, freqs), dim=-1)                                # (T, rot)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]                    # (1, 1, T, rot)
        q_rot, q_pass = q[..., : self.rot], q[..., self.rot:]
        k_rot, k_pass = k[..., : self.rot], k[..., self.rot:]
        q_rot = (q_rot * cos) + (rotate_half(q_rot) * sin)                         # [rope]
        k_rot = (k_rot * cos) + (rotate_half(k_rot) * sin)                         # [rope]
        q = torch.cat((q_rot, q_pass), dim=-1)                                     # (B, H, T, d_k)
        k = torch.cat((k_rot, k_pass), dim=-1)                                     # (B, H, T, d_k)
        w = (q @ k.transpose(-1, -2) / self.hd ** 0.5).softmax(dim=-1)             # (B, H, T, T)
        return self.dense((w @ v).transpose(1, 2).reshape(B, T, -1))               # (B, T, D)


class NeoXCachedTable(nn.Module):
    """huggingface/transformers models/gpt_neox/modeling_gpt_neox.py (v4.30 ``GPTNeoXAttention``): the
    tables are buffers ``cos_cached``/``sin_cached`` of ``max_position_embeddings`` rows built at
    construction, read as ``cos = cos[position_ids].unsqueeze(1)`` with ``position_ids =
    torch.arange(seq_len).unsqueeze(0)``; the fused ``query_key_value`` is laid out ``[H, 3 * d_k]``."""

    def __init__(self, dim: int, heads: int, max_pos: int = 16):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.query_key_value, self.dense = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        freqs = torch.outer(torch.arange(max_pos).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)                                    # (max_pos, d_k)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        qkv = self.query_key_value(x).view(B, T, self.heads, 3 * self.hd)          # (B, T, H, 3*d_k)
        q = qkv[..., : self.hd].permute(0, 2, 1, 3)                                # (B, H, T, d_k)
        k = qkv[..., self.hd: 2 * self.hd].permute(0, 2, 1, 3)                     # (B, H, T, d_k)
        v = qkv[..., 2 * self.hd:].permute(0, 2, 1, 3)                             # (B, H, T, d_k)
        position_ids = torch.arange(T).unsqueeze(0)                                # (1, T)
        cos = self.cos_cached[position_ids].unsqueeze(1)                           # (1, 1, T, d_k)
        sin = self.sin_cached[position_ids].unsqueeze(1)                           # (1, 1, T, d_k)
        q = q * cos + rotate_half(q) * sin                                         # [rope]
        k = k * cos + rotate_half(k) * sin                                         # [rope]
        w = (q @ k.transpose(-1, -2) / self.hd ** 0.5).softmax(dim=-1)             # (B, H, T, T)
        return self.dense((w @ v).permute(0, 2, 1, 3).reshape(B, T, -1))           # (B, T, D)


def rotate_every_two(x):
    """huggingface/transformers models/gptj/modeling_gptj.py ``rotate_every_two``."""
    x1, x2 = x[:, :, :, ::2], x[:, :, :, 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)                          # (B, T, H, rot) [rotate]


class GPTJRotary(nn.Module):
    """huggingface/transformers models/gptj/modeling_gptj.py ``GPTJAttention.forward``: ``sincos =
    embed_positions[position_ids]`` (a ``[max_pos, rot]`` buffer from ``create_sinusoidal_positions``),
    ``sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)``, ``apply_rotary_pos_emb`` with
    ``torch.repeat_interleave(sin[:, :, None, :], 2, 3)`` and ``rotate_every_two``, on the first
    ``rotary_dim`` features in the ``[B, T, H, d_k]`` layout. ``halves=True`` repeats the table as
    Llama's ``torch.cat((freqs, freqs))`` does, under GPT-J's interleaved rotation: a mismatch."""

    def __init__(self, dim: int, heads: int, halves: bool = False, max_pos: int = 16):
        super().__init__()
        self.heads, self.hd, self.halves = heads, dim // heads, halves
        self.rot = self.hd
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.out_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.rot, 2).float() / self.rot))
        sinusoid = torch.outer(torch.arange(max_pos).float(), inv)                 # (max_pos, rot/2)
        self.register_buffer("embed_positions", torch.cat((sinusoid.sin(), sinusoid.cos()), dim=1))

    def _repeat(self, t):
        t = t[:, :, None, :]                                                       # (B, T, 1, rot/2)
        return torch.cat((t, t), dim=-1) if self.halves else torch.repeat_interleave(t, 2, 3)  # (B, T, 1, rot)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.hd)                         # (B, T, H, d_k)
        k = self.k_proj(x).view(B, T, self.heads, self.hd)                         # (B, T, H, d_k)
        v = self.v_proj(x).view(B, T, self.heads, self.hd).permute(0, 2, 1, 3)     # (B, H, T, d_k)
        position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)                  # (B, T)
        sincos = self.embed_positions[position_ids]                                # (B, T, rot)
        sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)              # (B, T, rot/2)
        sin, cos = self._repeat(sin), self._repeat(cos)                            # (B, T, 1, rot)
        q = (q * cos + rotate_every_two(q) * sin).permute(0, 2, 1, 3)              # (B, H, T, d_k) [rope]
        k = (k * cos + rotate_every_two(k) * sin).permute(0, 2, 1, 3)              # (B, H, T, d_k) [rope]
        w = (q @ k.transpose(-1, -2) / self.hd ** 0.5).softmax(dim=-1)             # (B, H, T, T)
        return self.out_proj((w @ v).permute(0, 2, 1, 3).reshape(B, T, -1))       # (B, T, D)


class TableFromTheData(nn.Module):
    """Not a public style: a "table" computed from the hidden states themselves (``cos``/``sin`` of a
    projection of x) meets q as a rotary table does. Its values pair as ``rotate_half`` pairs, but its
    layout is the data's, not a table's: nothing is checked on its values."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.q_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.angle = nn.Linear(dim, self.hd // 2)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.hd).transpose(1, 2)         # (B, H, T, d_k)
        v = self.v_proj(x).view(B, T, self.heads, self.hd).transpose(1, 2)         # (B, H, T, d_k)
        theta = self.angle(x)                                                      # (B, T, d_k/2)
        emb = torch.cat((theta, theta), dim=-1)[:, None]                           # (B, 1, T, d_k)
        q = q * emb.cos() + rotate_half(q) * emb.sin()                             # [rope]
        w = (q @ q.transpose(-1, -2) / self.hd ** 0.5).softmax(dim=-1)             # (B, H, T, T)
        return (w @ v).transpose(1, 2).reshape(B, T, -1)                           # (B, T, D)


_traced = traced_named_input


CLEAR = ("✓ checked all {total} ops that could carry a layout bug ({by_values} of them on the values of the rotary "
         "tables or causal masks they build): every axis keeps its meaning from input to output" + UNASKED)


@pytest.mark.parametrize(("cls", "dims", "total", "by_values"), [
    (LlamaRotary, DIMS, 32, 7), (LlamaRotary, SQUARE, 32, 7), (PhiPartialRotary, DIMS, 31, 3),
    (PhiPartialRotary, SQUARE_WIDE, 31, 3), (NeoXCachedTable, DIMS, 26, 4), (NeoXCachedTable, SQUARE, 26, 4),
    (GPTJRotary, DIMS, 32, 10), (GPTJRotary, SQUARE, 32, 10)])
def test_a_correct_rotary_table_read_on_its_values_earns_the_check_mark(cls, dims, total, by_values):
    t = _traced(cls, dims)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert t.report().verdict.line == CLEAR.format(total=total, by_values=by_values)


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_the_table_indexed_by_positions_is_counted_without_a_name_it_cannot_prove(dims):
    """NeoX's ``cos_cached[position_ids]``: the ops that read the table are checked on the values; the
    names they carry are only those provenance gives (the positions' T, nothing for the frequencies)."""
    t = _traced(NeoXCachedTable, dims)
    reads = [e for e in t.events if e.op == "__getitem__" and "cached[position_ids]" in e.code]
    assert [e.outputs[0].dims for e in reads] == [(None, "T", None)] * 2
    assert all(e.checked_on_values for e in reads)
    assert t.report().verdict.unchecked == ()


@pytest.mark.parametrize(("dims", "kwargs", "kinds"), [
    (DIMS, {"interleaved": True}, ["rotary-pairing-mismatch"]),
    (SQUARE_WIDE, {"interleaved": True}, ["rotary-pairing-mismatch"]),
    ("B=5 T=5 D=32 H=4", {"from_batch": True}, ["broadcast-mismatch"] * 2),   # (it runs only where B = T)
    (SQUARE_WIDE, {"from_batch": True}, ["broadcast-mismatch"] * 2)])
def test_the_buggy_twins_stay_errors(dims, kwargs, kinds):
    t = _traced(PhiPartialRotary, dims, **kwargs)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == kinds
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_a_table_made_from_the_data_is_not_checked_on_its_values(dims):
    t = _traced(TableFromTheData, dims)
    verdict = t.report().verdict
    assert not any(e.checked_on_values for e in t.events)
    assert verdict.mark == "?" and verdict.on_values == 0


@pytest.mark.parametrize("from_batch", [False, True])
def test_a_single_position_earns_nothing_on_the_values(from_batch):
    """A decode step's one token (transformers' Llama at generation, ``q_len == 1``): the tables cannot
    show that their angles change along the tokens, and positions counted along the batch
    (``torch.arange(bsz)``) change along the batch instead, which no rule can call wrong at one token:
    nothing is counted as checked on the values, so neither earns a ``✓``."""
    torch.manual_seed(0)
    model = LlamaRotary(32, 4, from_batch=from_batch).eval()
    x = torch.randn(3, 1, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=3 T=1 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        model(x)
    verdict = t.report().verdict
    assert (verdict.mark, verdict.on_values) == ("?", 0)


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_gptj_halves_table_under_an_interleaved_rotation_stays_an_error(dims):
    t = _traced(GPTJRotary, dims, halves=True)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["rotary-pairing-mismatch"]
    assert t.report().verdict.mark == "✗"
