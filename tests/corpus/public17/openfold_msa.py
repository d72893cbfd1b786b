"""aqlaboratory/openfold, openfold/model/msa.py (``MSARowAttentionWithPairBias``, ``MSAColumnAttention``) and
openfold/model/primitives.py (``Attention``), v2.0: the MSA ``m`` is ``(B, S, R, c_m)`` (S aligned sequences of R
residues; here R is the token axis T); ``linear_q/k/v`` then ``q.view(q.shape[:-1] + (H, -1)).transpose(-2, -3)``,
``q /= sqrt(c_hidden)``, ``a = q @ permute_final_dims(k, (1, 0))``, the biases added, ``softmax(a, -1)``, ``o = a @
v``, ``o.transpose(-2, -3)``, the gate ``o = o * sigmoid(linear_g(q_x)).view(..., H, -1)``, ``flatten_final_dims(o,
2)``, ``linear_o``. Row attention: the mask bias ``(inf * (mask - 1))[..., :, None, None, :]`` and the pair bias
``linear_z(layer_norm_z(z))`` on the pair representation ``(B, R, R, c_z)``, ``permute_final_dims(z, (2, 0, 1))``
to ``(B, H, R, R)`` and ``unsqueeze(-4)`` to broadcast over the S rows. Column attention: ``m.transpose(-2, -3)``,
the same attention without pair bias over S, and the swap back.

Bugs (argument): ``pair-bias-viewed``: the pair bias ``(B, R, R, H)`` brought heads-first by
``z.view(B, H, R, R)`` (the shape copied, the permute forgotten); ``column-not-swapped-back``: the column
attention's output ``(B, R, S, c_m)`` reshaped to ``(B, S, R, c_m)`` for the residual instead of transposed back
(reshape accepts it, so no shape shows it)."""

import math
import sys

import torch
from torch import nn


def permute_final_dims(tensor, inds):
    zero_index = -1 * len(inds)
    first_inds = list(range(len(tensor.shape[:zero_index])))
    return tensor.permute(first_inds + [zero_index + i for i in inds])


def flatten_final_dims(t, no_dims):
    return t.reshape(t.shape[:-no_dims] + (-1,))


class Attention(nn.Module):
    def __init__(self, c_in, c_hidden, no_heads):
        super().__init__()
        self.c_hidden, self.no_heads = c_hidden, no_heads
        self.linear_q = nn.Linear(c_in, c_hidden * no_heads, bias=False)
        self.linear_k = nn.Linear(c_in, c_hidden * no_heads, bias=False)
        self.linear_v = nn.Linear(c_in, c_hidden * no_heads, bias=False)
        self.linear_g = nn.Linear(c_in, c_hidden * no_heads)
        self.linear_o = nn.Linear(c_hidden * no_heads, c_in)

    def forward(self, q_x, kv_x, biases):                                          # (B, S, R, c)
        q, k, v = self.linear_q(q_x), self.linear_k(kv_x), self.linear_v(kv_x)
        q = q.view(q.shape[:-1] + (self.no_heads, -1)).transpose(-2, -3)             # (B, S, H, R, d)
        k = k.view(k.shape[:-1] + (self.no_heads, -1)).transpose(-2, -3)
        v = v.view(v.shape[:-1] + (self.no_heads, -1)).transpose(-2, -3)
        q = q / math.sqrt(self.c_hidden)
        a = torch.matmul(q, permute_final_dims(k, (1, 0)))                           # (B, S, H, R, R)
        for b in biases:
            a = a + b
        a = torch.softmax(a, dim=-1)
        o = torch.matmul(a, v).transpose(-2, -3)                                     # (B, S, R, H, d)
        g = torch.sigmoid(self.linear_g(q_x))
        o = o * g.view(g.shape[:-1] + (self.no_heads, -1))
        return self.linear_o(flatten_final_dims(o, 2))                               # (B, S, R, c)


class MSARowAttentionWithPairBias(nn.Module):
    def __init__(self, c_m, c_z, c_hidden, no_heads, bug=""):
        super().__init__()
        self.no_heads, self.bug, self.inf = no_heads, bug, 1e9
        self.layer_norm_m, self.layer_norm_z = nn.LayerNorm(c_m), nn.LayerNorm(c_z)
        self.linear_z = nn.Linear(c_z, no_heads, bias=False)
        self.mha = Attention(c_m, c_hidden, no_heads)

    def forward(self, m, z, mask):                                                 # (B, S, R, c_m), (B, R, R, c_z)
        m = self.layer_norm_m(m)
        mask_bias = (self.inf * (mask - 1))[..., :, None, None, :]                   # (B, S, 1, 1, R)
        z = self.linear_z(self.layer_norm_z(z))                                      # (B, R, R, H)
        if self.bug == "pair-bias-viewed":
            z = z.view(z.shape[0], self.no_heads, z.shape[1], z.shape[2]).unsqueeze(-4)
        else:
            z = permute_final_dims(z, (2, 0, 1)).unsqueeze(-4)                       # (B, 1, H, R, R)
        return self.mha(m, m, [mask_bias, z])


class MSAColumnAttention(nn.Module):
    def __init__(self, c_m, c_hidden, no_heads, bug=""):
        super().__init__()
        self.bug, self.inf = bug, 1e9
        self.layer_norm_m = nn.LayerNorm(c_m)
        self.mha = Attention(c_m, c_hidden, no_heads)

    def forward(self, m, mask):                                                    # (B, S, R, c_m)
        m = m.transpose(-2, -3)                                                      # (B, R, S, c_m)
        mask = mask.transpose(-1, -2)                                                # (B, R, S)
        m = self.layer_norm_m(m)
        mask_bias = (self.inf * (mask - 1))[..., :, None, None, :]
        m = self.mha(m, m, [mask_bias])
        if self.bug == "column-not-swapped-back":
            return m.reshape(m.shape[0], m.shape[2], m.shape[1], -1)
        return m.transpose(-2, -3)                                                   # (B, S, R, c_m)


class EvoformerMSAStack(nn.Module):
    def __init__(self, c_m, c_z, heads, bug=""):
        super().__init__()
        self.row = MSARowAttentionWithPairBias(c_m, c_z, c_m // heads, heads, bug)
        self.col = MSAColumnAttention(c_m, c_m // heads, heads, bug)

    def forward(self, m, z, mask):
        m = m + self.row(m, z, mask)
        return m + self.col(m, mask)


BUGS = ("pair-bias-viewed", "column-not-swapped-back")
TWINS = ()
DIMS = ("B=2 S=3 T=5 D=32 H=4",)
EQUAL = {"B=2 S=3 T=5 D=32 H=4": "B=4 S=4 T=4 D=32 H=4"}


def build(bug="", B=2, S=3, T=5, D=32, H=4):
    torch.manual_seed(0)
    mask = torch.ones(B, S, T)
    mask[-1, :, -1] = 0.0                                                           # the last batch's residue padded
    return EvoformerMSAStack(D, 8, H, bug).eval(), (torch.randn(B, S, T, D), torch.randn(B, T, T, 8), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
