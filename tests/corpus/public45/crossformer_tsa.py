"""Thinklab-SJTU/Crossformer, cross_models/attn.py (``FullAttention``, ``AttentionLayer``,
``TwoStageAttentionLayer``, commit c10c8ea): the segment embeddings ``(B, ts_d, seg_num, d_model)`` (here ts_d = N
variates, seg_num = T segments); the cross-time stage ``rearrange('b ts_d seg_num d_model -> (b ts_d) seg_num
d_model')`` and self-attention over the segments (``view(B, L, H, -1)``, ``einsum("blhe,bshe->bhls")``,
``softmax(scale * scores, -1)``, ``einsum("bhls,bshd->blhd")``), residual, ``norm1``, ``MLP1``, ``norm2``; the
cross-dimension stage ``rearrange('(b ts_d) seg_num d_model -> (b seg_num) ts_d d_model', b=batch)``, the learnt
router ``(seg_num, factor, d_model)`` tiled by ``repeat('seg_num factor d_model -> (repeat seg_num) factor
d_model', repeat=batch)``, ``dim_sender(router, send, send)`` (the factor router tokens gather from the variates),
``dim_receiver(send, buffer, buffer)`` (the variates read them back), residual, ``norm3``, ``MLP2``, ``norm4``,
``rearrange('(b seg_num) ts_d d_model -> b ts_d seg_num d_model', b=batch)``.

Bugs: ``router-tiled-segment-major``: ``repeat(..., '-> (seg_num repeat) factor d_model')``: rows ordered
segment-major against the batch-major ``(b seg_num)`` rows they query: each segment of each series reads
another segment's router; ``send-variates-first``: the cross-dimension fold ``'(ts_d b) seg_num d_model -> (b
seg_num) ts_d d_model'`` from batch-major ``(b ts_d)`` rows: series of different samples mixed."""

import sys
from math import sqrt

import torch
from einops import rearrange, repeat
from torch import nn


class FullAttention(nn.Module):
    def forward(self, queries, keys, values):                                      # (B, L, H, E), (B, S, H, D)
        B, L, H, E = queries.shape
        scale = 1.0 / sqrt(E)
        scores = torch.einsum("blhe,bshe->bhls", queries, keys)                      # (B, H, L, S)
        A = torch.softmax(scale * scores, dim=-1)
        return torch.einsum("bhls,bshd->blhd", A, values).contiguous()               # (B, L, H, D)


class AttentionLayer(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        d_keys = d_model // n_heads
        self.inner_attention = FullAttention()
        self.query_projection = nn.Linear(d_model, d_keys * n_heads)
        self.key_projection = nn.Linear(d_model, d_keys * n_heads)
        self.value_projection = nn.Linear(d_model, d_keys * n_heads)
        self.out_projection = nn.Linear(d_keys * n_heads, d_model)
        self.n_heads = n_heads

    def forward(self, queries, keys, values):                                      # (B, L, D), (B, S, D)
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads
        queries = self.query_projection(queries).view(B, L, H, -1)                   # (B, L, H, d)
        keys = self.key_projection(keys).view(B, S, H, -1)                           # (B, S, H, d)
        values = self.value_projection(values).view(B, S, H, -1)                     # (B, S, H, d)
        out = self.inner_attention(queries, keys, values)
        out = out.view(B, L, -1)                                                     # (B, L, D)
        return self.out_projection(out)


class TwoStageAttentionLayer(nn.Module):
    def __init__(self, seg_num, factor, d_model, n_heads, bug=""):
        super().__init__()
        self.bug = bug
        d_ff = 4 * d_model
        self.time_attention = AttentionLayer(d_model, n_heads)
        self.dim_sender = AttentionLayer(d_model, n_heads)
        self.dim_receiver = AttentionLayer(d_model, n_heads)
        self.router = nn.Parameter(torch.randn(seg_num, factor, d_model))
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm3, self.norm4 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.MLP1 = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.MLP2 = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x):                                                          # (B, N, T, D)
        batch = x.shape[0]
        time_in = rearrange(x, "b ts_d seg_num d_model -> (b ts_d) seg_num d_model")  # (B*N, T, D)
        time_enc = self.time_attention(time_in, time_in, time_in)
        dim_in = self.norm1(time_in + time_enc)
        dim_in = self.norm2(dim_in + self.MLP1(dim_in))
        send = "(ts_d b) seg_num d_model -> (b seg_num) ts_d d_model" if self.bug == "send-variates-first" else \
            "(b ts_d) seg_num d_model -> (b seg_num) ts_d d_model"
        dim_send = rearrange(dim_in, send, b=batch)                                  # (B*T, N, D)
        tile = "seg_num factor d_model -> (seg_num repeat) factor d_model" \
            if self.bug == "router-tiled-segment-major" else "seg_num factor d_model -> (repeat seg_num) factor d_model"
        batch_router = repeat(self.router, tile, repeat=batch)                       # (B*T, c, D)
        dim_buffer = self.dim_sender(batch_router, dim_send, dim_send)               # (B*T, c, D)
        dim_receive = self.dim_receiver(dim_send, dim_buffer, dim_buffer)            # (B*T, N, D)
        dim_enc = self.norm3(dim_send + dim_receive)
        dim_enc = self.norm4(dim_enc + self.MLP2(dim_enc))
        return rearrange(dim_enc, "(b seg_num) ts_d d_model -> b ts_d seg_num d_model", b=batch)  # (B, N, T, D)


BUGS = ("router-tiled-segment-major", "send-variates-first")
TWINS = ()
DIMS = ("B=2 T=4 D=32 H=4 N=3",)
EQUAL = {"B=2 T=4 D=32 H=4 N=3": "B=4 T=4 D=32 H=4 N=4"}


def build(bug="", B=2, T=4, D=32, H=4, N=3):
    torch.manual_seed(0)
    return TwoStageAttentionLayer(T, 2, D, H, bug).eval(), (torch.randn(B, N, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
