"""thuml/iTransformer, model/iTransformer.py, layers/Embed.py (``DataEmbedding_inverted``),
layers/SelfAttention_Family.py (``FullAttention``, ``AttentionLayer``): a multivariate series ``(B, L, N)`` (L
time steps, N variates) is inverted so each variate is a token: ``x.permute(0, 2, 1)`` and a Linear(L, D) gives
``(B, N, D)``; ``AttentionLayer``: ``query_projection(queries).view(B, L, H, -1)`` (its ``L`` the tokens, here the
variates), ``FullAttention``: ``torch.einsum("blhe,bshe->bhls")``, ``scale * scores``, softmax over ``s``,
``torch.einsum("bhls,bshd->blhd")``, ``out.view(B, L, -1)``, ``out_projection``; the projector Linear(D, S) and
``.permute(0, 2, 1)[:, :, :N]`` back to ``(B, S, N)``. Here the series' time steps are ``T``, the variates ``N``
(the tokens attention runs over), the forecast 5 steps; a first DIMS that names the variates ``T`` names no
input axis (the series' 12 steps are declared nowhere), the second names both.

Bugs (argument): ``embed-reshaped``: the inversion written ``x.reshape(B, N, L)`` (a reshape where the permute
is meant: each "variate" token a run of time steps of several variates); ``softmax-over-queries``:
``torch.softmax(scale * scores, dim=-2)``."""

import sys

import torch
from torch import nn


class FullAttention(nn.Module):
    def __init__(self, bug=""):
        super().__init__()
        self.bug = bug

    def forward(self, queries, keys, values):
        B, L, H, E = queries.shape
        scale = 1.0 / E**0.5
        scores = torch.einsum("blhe,bshe->bhls", queries, keys)
        A = torch.softmax(scale * scores, dim=-2 if self.bug == "softmax-over-queries" else -1)
        V = torch.einsum("bhls,bshd->blhd", A, values)
        return V.contiguous()


class AttentionLayer(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.inner_attention = FullAttention(bug)
        self.query_projection = nn.Linear(d_model, d_model)
        self.key_projection = nn.Linear(d_model, d_model)
        self.value_projection = nn.Linear(d_model, d_model)
        self.out_projection = nn.Linear(d_model, d_model)
        self.n_heads = n_heads

    def forward(self, queries, keys, values):
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads
        queries = self.query_projection(queries).view(B, L, H, -1)
        keys = self.key_projection(keys).view(B, S, H, -1)
        values = self.value_projection(values).view(B, S, H, -1)
        out = self.inner_attention(queries, keys, values)
        return self.out_projection(out.view(B, L, -1))


class Model(nn.Module):
    def __init__(self, seq_len, pred_len, d_model, n_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.value_embedding = nn.Linear(seq_len, d_model)
        self.attention = AttentionLayer(d_model, n_heads, bug)
        self.norm = nn.LayerNorm(d_model)
        self.projector = nn.Linear(d_model, pred_len)

    def forward(self, x_enc):                                                      # (B, L, N)
        B, L, N = x_enc.shape
        if self.bug == "embed-reshaped":
            x = x_enc.reshape(B, N, L)
        else:
            x = x_enc.permute(0, 2, 1)                                               # (B, N, L)
        enc_out = self.value_embedding(x)                                            # (B, N, D)
        enc_out = self.norm(enc_out + self.attention(enc_out, enc_out, enc_out))
        return self.projector(enc_out).permute(0, 2, 1)[:, :, :N]                    # (B, S, N)


BUGS = ("embed-reshaped", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=12 N=6 D=32 H=4",)
EQUAL = {"B=2 T=12 N=6 D=32 H=4": "B=4 T=12 N=4 D=32 H=4"}


def build(bug="", B=2, T=12, N=6, D=32, H=4):
    torch.manual_seed(0)
    return Model(T, 5, D, H, bug).eval(), (torch.randn(B, T, N),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
