"""Rotary positions counted along the tokens (issue 33 items 3 and 5): a rotary table read from its values
must change along the axis the names say holds the tokens. Positions counted along the batch
(``arange(bsz)`` expanded over the tokens, or a sequence-first table applied to batch-first q) turn every
token of a sequence by the same angles, which q·k cancels: an error, found at distinct sizes and at
B = T = H = d_k = 4, where nothing about the shapes can tell the axes apart. Their correct twins stay
silent.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace
from tests.corpus.helpers import Case, corpus_tests, trace_case

DIMS = "B=2 T=5 D=24 H=3"            # d_k = 8
SQUARE = "B=4 T=4 D=16 H=4"          # B = T = H = d_k = 4


def rotate_half(x):
    """huggingface/transformers Llama ``rotate_half``."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)                               # (..., d_k) [rotate]


class LlamaRotary(nn.Module):
    """huggingface/transformers models/llama/modeling_llama.py ``LlamaRotaryEmbedding.forward(x,
    position_ids)``: ``inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0],
    -1, 1)``, ``freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)``, ``emb = torch.cat((freqs,
    freqs), dim=-1)``, with ``LlamaAttention`` applying ``q * cos + rotate_half(q) * sin`` (``unsqueeze_dim=1``).
    ``from_batch=True`` builds ``position_ids = torch.arange(bsz).unsqueeze(1).expand(-1, q_len)``: the
    positions count the sequences of the batch, not the tokens of a sequence."""

    def __init__(self, dim: int, heads: int, from_batch: bool = False):
        super().__init__()
        self.heads, self.hd, self.from_batch = heads, dim // heads, from_batch
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd)),
                             persistent=False)

    def rotary(self, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)  # (B, d_k/2, 1)
        pos = position_ids[:, None, :].float()                                      # (B, 1, T)
        freqs = (inv @ pos).transpose(1, 2)                                         # (B, T, d_k/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                     # (B, T, d_k)
        return emb.cos(), emb.sin()

    def forward(self, x):
        bsz, q_len, _ = x.size()
        if self.from_batch:
            position_ids = torch.arange(bsz).unsqueeze(1).expand(-1, q_len)         # (B, T) [positions]
        else:
            position_ids = torch.arange(q_len).unsqueeze(0).expand(bsz, -1)         # (B, T) [positions]
        q = self.q_proj(x).view(bsz, q_len, self.heads, self.hd).transpose(1, 2)    # (B, H, T, d_k)
        k = self.k_proj(x).view(bsz, q_len, self.heads, self.hd).transpose(1, 2)    # (B, H, T, d_k)
        v = self.v_proj(x).view(bsz, q_len, self.heads, self.hd).transpose(1, 2)    # (B, H, T, d_k)
        cos, sin = self.rotary(position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                               # (B, 1, T, d_k)
        q = q * cos + rotate_half(q) * sin                                          # (B, H, T, d_k) [rope]
        k = k * cos + rotate_half(k) * sin                                          # (B, H, T, d_k) [rope]
        w = (q @ k.transpose(2, 3) / self.hd ** 0.5).softmax(dim=-1)                # (B, H, T, T)
        out = (w @ v).transpose(1, 2).reshape(bsz, q_len, -1)                       # (B, T, D)
        return self.o_proj(out)


class NeoXRotary(nn.Module):
    """EleutherAI/gpt-neox megatron/model/positional_embeddings.py ``RotaryEmbedding.forward(x, seq_dim=0,
    seq_len=None)``: ``seq_len = x.shape[seq_dim]``, ``t = torch.arange(seq_len)``, ``freqs =
    torch.einsum("i,j->ij", t, self.inv_freq)``, ``self.cos_cached = emb.cos()[:, None, None, :]``: a table
    laid out ``[sq, 1, 1, hn]`` for NeoX's sequence-first ``[sq, b, np, hn]`` query layer. ``batch_first=True``
    reuses it unchanged on a batch-first ``[b, sq, np, hn]`` layer (the default ``seq_dim=0`` then reads the
    batch size, and the table lines up with the batch)."""

    def __init__(self, dim: int, heads: int, batch_first: bool = False):
        super().__init__()
        self.heads, self.hd, self.batch_first = heads, dim // heads, batch_first
        self.query_key_value, self.dense = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd)),
                             persistent=False)

    def rotary_embedding(self, x, seq_dim=0):
        t = torch.arange(x.shape[seq_dim]).type_as(self.inv_freq)                  # (sq,)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)                         # (sq, hn/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                   # (sq, hn)
        return emb.cos()[:, None, None, :], emb.sin()[:, None, None, :]           # (sq, 1, 1, hn)

    def forward(self, x):
        B, T, D = x.shape
        if not self.batch_first:
            x = x.transpose(0, 1)                                                 # (T, B, D): sequence first
        qkv = self.query_key_value(x).view(*x.shape[:2], self.heads, 3 * self.hd)  # (sq, b, np, 3 hn)
        q, k, v = qkv.split(self.hd, dim=-1)                                      # (sq, b, np, hn)
        cos, sin = self.rotary_embedding(x)
        q = q * cos + rotate_half(q) * sin                                        # (sq, b, np, hn) [rope]
        k = k * cos + rotate_half(k) * sin                                        # (sq, b, np, hn) [rope]
        if not self.batch_first:
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))                      # (B, T, H, d_k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))                          # (B, H, T, d_k)
        w = (q @ k.transpose(-1, -2) / self.hd ** 0.5).softmax(dim=-1)            # (B, H, T, T)
        return self.dense((w @ v).transpose(1, 2).reshape(B, T, D))               # (B, T, D)


def _sizes(dims: str) -> tuple[int, int, int, int]:
    sizes = dict(part.split("=") for part in dims.split())
    return tuple(int(sizes[k]) for k in "BTDH")


def build(cls, dims: str, **kwargs):
    B, T, D, H = _sizes(dims)

    def make():
        return cls(D, H, **kwargs).eval(), (torch.randn(B, T, D),)
    return make


CASES = []
for size_id, dims in (("", DIMS), ("-equal-sizes", SQUARE)):
    CASES += [
        Case("llama-position-ids" + size_id, dims, build(LlamaRotary, dims), silent=("rope", "rotate"),
             names=("B T D",)),
        Case("llama-position-ids-from-batch" + size_id, dims, build(LlamaRotary, dims, from_batch=True),
             bug=("rotate",), names=("B T D",)),
        Case("neox-sequence-first" + size_id, dims, build(NeoXRotary, dims), silent=("rope", "rotate"),
             names=("B T D",)),
        Case("neox-sequence-first-table-on-batch-first" + size_id, dims,
             build(NeoXRotary, dims, batch_first=True), bug=("rotate",), names=("B T D",)),
    ]

test_names, test_verdict = corpus_tests(__name__, CASES)


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_positions_from_the_batch_message_names_the_axis_the_angles_change_along(dims):
    t = trace_case(Case("x", dims, build(LlamaRotary, dims, from_batch=True), names=("B T D",)))
    found = [d for d in t.diagnostics if d.severity == "error"]
    assert {d.kind for d in found} == {"rotary-same-angle-every-token"}
    B, T, H = (t.dims[k] for k in "BTH")
    d_k = t.dims["D"] // H
    e = t.events[found[0].event]
    assert (e.op, e.outputs[0].dims) == ("cat", ("B", "H", "T", "d_k"))
    assert found[0].message == (
        f"the rotary embedding rotated at cat #{e.index} turns [B={B}, H={H}, T={T}, d_k={d_k}] by the same angles "
        f"at every token along T (axis 2): neither its cos nor its sin table changes along it, their angles "
        "change along B (batch) instead. q·k cancels a rotation both share, so the scores get no position from it.")
    assert t.report().verdict.mark == "✗"


class CachedRotaryAttention(nn.Module):
    """meta-llama/llama model.py ``Attention.forward(x, start_pos, freqs_cis, mask)``: the rotary table is
    ``freqs_cis[start_pos : start_pos + seqlen]``, so a decode step's token is turned by its position after
    the cached ones; the cache grows as transformers' ``DynamicCache.update`` grows it, ``torch.cat([cache,
    k], dim=-2)``. ``restart=True`` counts each call's positions from 0 (``torch.arange(seqlen)``, the slip
    transformers' ``prepare_inputs_for_generation`` guards against by slicing ``position_ids`` to the new
    tokens): every decode step's key is turned by position 0."""

    def __init__(self, dim: int, heads: int, restart: bool = False):
        super().__init__()
        self.heads, self.hd, self.restart = heads, dim // heads, restart
        self.wq, self.wk = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.wv, self.wo = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd)),
                             persistent=False)
        self.k_cache = self.v_cache = None

    def rope(self, x, positions):
        freqs = torch.outer(positions.float(), self.inv_freq)                      # (T, d_k/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                    # (T, d_k)
        return x * emb.cos() + rotate_half(x) * emb.sin()                          # (B, H, T, d_k) [rope]

    def forward(self, x):
        B, T, _ = x.shape
        start_pos = 0 if self.k_cache is None else self.k_cache.shape[2]
        positions = torch.arange(T) if self.restart else torch.arange(start_pos, start_pos + T)  # (T,)
        q = self.wq(x).view(B, T, self.heads, self.hd).transpose(1, 2)             # (B, H, T, d_k)
        k = self.wk(x).view(B, T, self.heads, self.hd).transpose(1, 2)             # (B, H, T, d_k)
        v = self.wv(x).view(B, T, self.heads, self.hd).transpose(1, 2)             # (B, H, T, d_k)
        q, k = self.rope(q, positions), self.rope(k, positions)
        if self.k_cache is not None:
            k = torch.cat([self.k_cache, k], dim=-2)                               # (B, H, past+T, d_k) [append]
            v = torch.cat([self.v_cache, v], dim=-2)                               # (B, H, past+T, d_k)
        self.k_cache, self.v_cache = k, v
        w = (q @ k.transpose(-2, -1) / self.hd ** 0.5)                             # (B, H, T, past+T)
        if T > 1:
            w = w.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        out = (w.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, -1)            # (B, T, D)
        return self.wo(out)


def _decoded(dims: str, restart: bool):
    B, T, D, H = _sizes(dims)
    torch.manual_seed(0)
    model = CachedRotaryAttention(D, H, restart=restart).eval()
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        y = model(x)                                                               # prefill
        for _ in range(2):
            y = model(y[:, -1:, :])                                                # one token a step
    return t


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_a_decode_step_whose_positions_restart_is_an_error_and_the_offset_twin_is_silent(dims):
    assert [d.kind for d in _decoded(dims, restart=False).diagnostics if d.severity != "note"] == []
    t = _decoded(dims, restart=True)
    found = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in found] == ["rotary-position-restarts"]
    B, T, H = (t.dims[k] for k in "BTH")
    d_k = t.dims["D"] // H
    e = t.events[found[0].event]
    assert e.op == "cat" and "[append]" in e.code
    assert found[0].message.endswith(
        f"turns [B={B}, H={H}, T[-1:]=1, d_k={d_k}] by position 0 (its cos table is 1 and its sin table 0 on every "
        f"feature), and cat #{e.index} then appends it along T[-1:] (axis 2) after {T} tokens: its position starts "
        f"again at 0 instead of continuing at {T}, so q·k reads the distances to the cached keys wrong.")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("dims", "said"), [(DIMS, ["rotary-same-angle-every-token"]), (SQUARE, [])])
def test_with_no_input_named_equal_sizes_leave_the_tokens_axis_unproven(dims, said):
    """Names seeded from sizes alone: at B = 2, T = 5 the tokens axis is still told apart; at B = T = H = 4
    which axis holds the tokens was a guess, so no finding rests on it (and no ✓ either)."""
    B, T, D, H = _sizes(dims)
    torch.manual_seed(0)
    model = LlamaRotary(D, H, from_batch=True).eval()
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(torch.randn(B, T, D))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == said
    assert t.report().verdict.mark != "✓"
