"""Thinklab-SJTU/Crossformer issue #12 ("attn.py中的mix?", "the mix in attn.py?"; fixed by the maintainer, who at
first replied that ``out`` was ``[batch_size, head_num, length, d_model_per_head]``; David-Ttao: the einsum already
returns ``[batch_size, length, head_num, d_model_per_head]``, so ``mix`` is unneeded; YunhaoZhang-Mars: "您是对的，
这里确实不需要transpose" -- "you are right, the transpose is not needed here ... our original attention used
torch.matmul, whose output was ``[B, H, L, E]``; the released code uses einsum, which multiplies and transposes in
one step, but we forgot to change this. We have fixed this bug"): cross_models/attn.py ``AttentionLayer`` with
``mix=True`` (its default, so every attention of the ``TwoStageAttentionLayer``) ran ``out = out.transpose(2, 1)
.contiguous()`` before ``out.view(B, L, -1)``: the ``(B, H, L, E)`` buffer read as ``L`` rows of ``H * E`` mixes
the segments of all heads into each segment's features.

The idiom (Crossformer's cross-time stage of ``TwoStageAttentionLayer``, the encoder's first step): the segment
embeddings ``(B, ts_d, seg_num, d_model)`` folded ``rearrange('b ts_d seg_num d_model -> (b ts_d) seg_num
d_model')``, ``AttentionLayer`` (``query_projection(...).view(B, L, H, -1)``, ``FullAttention``'s
``einsum("blhe,bshe->bhls")``, ``softmax(scale * scores, dim=-1)``, ``einsum("bhls,bshd->blhd")``, ``view(B, L,
-1)``, ``out_projection``), residual, ``norm1``, ``MLP1``, ``norm2``, unfolded back.

Bugs (argument): ``mix-transpose``: ``AttentionLayer(mix=True)``, the transpose before the view (the code of issue
#12); ``time-stage-over-variates``: the fold ``'b ts_d seg_num d_model -> (b seg_num) ts_d d_model'`` (issue #2's
reading, which the maintainer answered: the cross-time stage must fold the variates into the batch and attend over
the segments; this one attends across the variates at each segment)."""

import sys
from math import sqrt

import torch
from einops import rearrange
from torch import nn

BUGS = ("mix-transpose", "time-stage-over-variates")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4 N=3",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 N=4"}


class FullAttention(nn.Module):
    def __init__(self, scale=None):
        super().__init__()
        self.scale = scale

    def forward(self, queries, keys, values):                                      # (B, L, H, E), (B, S, H, D)
        B, L, H, E = queries.shape
        scale = self.scale or 1.0 / sqrt(E)
        scores = torch.einsum("blhe,bshe->bhls", queries, keys)                      # (B, H, L, S)
        A = torch.softmax(scale * scores, dim=-1)
        V = torch.einsum("bhls,bshd->blhd", A, values)                               # (B, L, H, D)
        return V.contiguous()


class AttentionLayer(nn.Module):
    def __init__(self, d_model, n_heads, mix=False):
        super().__init__()
        d_keys = d_values = d_model // n_heads
        self.inner_attention = FullAttention()
        self.query_projection = nn.Linear(d_model, d_keys * n_heads)
        self.key_projection = nn.Linear(d_model, d_keys * n_heads)
        self.value_projection = nn.Linear(d_model, d_values * n_heads)
        self.out_projection = nn.Linear(d_values * n_heads, d_model)
        self.n_heads, self.mix = n_heads, mix

    def forward(self, queries, keys, values):                                      # (B, L, D), (B, S, D)
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads
        queries = self.query_projection(queries).view(B, L, H, -1)                   # (B, L, H, E)
        keys = self.key_projection(keys).view(B, S, H, -1)                           # (B, S, H, E)
        values = self.value_projection(values).view(B, S, H, -1)                     # (B, S, H, E)
        out = self.inner_attention(queries, keys, values)                            # (B, L, H, E)
        if self.mix:
            out = out.transpose(2, 1).contiguous()                                   # (B, H, L, E)
        out = out.view(B, L, -1)                                                     # (B, L, D)
        return self.out_projection(out)


class CrossTimeStage(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.time_attention = AttentionLayer(d_model, n_heads, mix=bug == "mix-transpose")
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.MLP1 = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):                                                          # (B, N, T, D)
        batch = x.shape[0]
        if self.bug == "time-stage-over-variates":
            time_in = rearrange(x, 'b ts_d seg_num d_model -> (b seg_num) ts_d d_model')    # (B*T, N, D)
        else:
            time_in = rearrange(x, 'b ts_d seg_num d_model -> (b ts_d) seg_num d_model')    # (B*N, T, D)
        time_enc = self.time_attention(time_in, time_in, time_in)
        dim_in = self.norm1(time_in + time_enc)
        dim_in = self.norm2(dim_in + self.MLP1(dim_in))
        if self.bug == "time-stage-over-variates":
            return rearrange(dim_in, '(b seg_num) ts_d d_model -> b ts_d seg_num d_model', b=batch)  # (B, N, T, D)
        return rearrange(dim_in, '(b ts_d) seg_num d_model -> b ts_d seg_num d_model', b=batch)       # (B, N, T, D)


def build(bug="", B=2, T=5, D=32, H=4, N=3):
    torch.manual_seed(0)
    return CrossTimeStage(D, H, bug).eval(), (torch.randn(B, N, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
