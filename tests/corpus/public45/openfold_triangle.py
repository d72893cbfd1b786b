"""aqlaboratory/openfold, openfold/model/triangular_attention.py (``TriangleAttention``,
``TriangleAttentionStartingNode``, ``TriangleAttentionEndingNode``, commit 07e6426) with
openfold/model/primitives.py (``Attention``): the pair representation ``x`` ``(B, I, J, c_z)`` (here I = J = T
residues); the ending node swaps ``x.transpose(-2, -3)`` and ``mask.transpose(-1, -2)`` first and back last;
``layer_norm``; the mask bias ``(inf * (mask - 1))[..., :, None, None, :]`` ``(B, I, 1, 1, J)``; the triangle
bias ``permute_final_dims(linear(x), (2, 0, 1))`` ``(B, H, I, J)`` and ``unsqueeze(-4)`` ``(B, 1, H, I, J)`` (the
same for every row i: the bias of edge j-k); ``Attention`` as in the MSA stack (q/k/v viewed ``(..., H, -1)`` and
``transpose(-2, -3)``, biases added, softmax over the last axis, the sigmoid gate, ``linear_o``).

Bugs: ``triangle-bias-transposed``: ``permute_final_dims(linear(x), (2, 1, 0))``, the bias
read ``(B, H, J, I)`` (edge k-j for j-k; the pair is square, so every shape still agrees);
``mask-bias-on-queries``: the mask bias ``[..., :, None, :, None]`` ``(B, I, 1, J, 1)``: padded residues are
masked as queries (whole rows at -inf) instead of as keys."""

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

    def forward(self, q_x, kv_x, biases):                                          # (B, I, J, c)
        q, k, v = self.linear_q(q_x), self.linear_k(kv_x), self.linear_v(kv_x)
        q = q.view(q.shape[:-1] + (self.no_heads, -1)).transpose(-2, -3)             # (B, I, H, J, d)
        k = k.view(k.shape[:-1] + (self.no_heads, -1)).transpose(-2, -3)             # (B, I, H, K, d)
        v = v.view(v.shape[:-1] + (self.no_heads, -1)).transpose(-2, -3)             # (B, I, H, K, d)
        q = q / math.sqrt(self.c_hidden)
        a = torch.matmul(q, permute_final_dims(k, (1, 0)))                           # (B, I, H, J, K)
        for b in biases:
            a = a + b
        a = torch.softmax(a, dim=-1)
        o = torch.matmul(a, v).transpose(-2, -3)                                     # (B, I, J, H, d)
        g = torch.sigmoid(self.linear_g(q_x))
        o = o * g.view(g.shape[:-1] + (self.no_heads, -1))                           # (B, I, J, H, d)
        return self.linear_o(flatten_final_dims(o, 2))                               # (B, I, J, c)


class TriangleAttention(nn.Module):
    def __init__(self, c_in, c_hidden, no_heads, starting, bug=""):
        super().__init__()
        self.no_heads, self.starting, self.bug, self.inf = no_heads, starting, bug, 1e9
        self.layer_norm = nn.LayerNorm(c_in)
        self.linear = nn.Linear(c_in, no_heads, bias=False)
        self.mha = Attention(c_in, c_hidden, no_heads)

    def forward(self, x, mask):                                                    # (B, I, J, c_z), (B, I, J)
        if not self.starting:
            x = x.transpose(-2, -3)                                                  # (B, J, I, c_z)
            mask = mask.transpose(-1, -2)                                            # (B, J, I)
        x = self.layer_norm(x)
        if self.bug == "mask-bias-on-queries":
            mask_bias = (self.inf * (mask - 1))[..., :, None, :, None]               # (B, I, 1, J, 1)
        else:
            mask_bias = (self.inf * (mask - 1))[..., :, None, None, :]               # (B, I, 1, 1, J)
        order = (2, 1, 0) if self.bug == "triangle-bias-transposed" else (2, 0, 1)
        triangle_bias = permute_final_dims(self.linear(x), order)                    # (B, H, I, J)
        triangle_bias = triangle_bias.unsqueeze(-4)                                  # (B, 1, H, I, J)
        x = self.mha(x, x, [mask_bias, triangle_bias])                               # (B, I, J, c_z)
        if not self.starting:
            x = x.transpose(-2, -3)                                                  # (B, I, J, c_z)
        return x


class PairStack(nn.Module):
    def __init__(self, c_z, heads, bug=""):
        super().__init__()
        self.start = TriangleAttention(c_z, c_z // heads, heads, starting=True, bug=bug)
        self.end = TriangleAttention(c_z, c_z // heads, heads, starting=False, bug=bug)

    def forward(self, z, mask):
        z = z + self.start(z, mask)
        return z + self.end(z, mask)


BUGS = ("triangle-bias-transposed", "mask-bias-on-queries")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)


def build(bug="", B=2, T=5, D=32, H=4):
    torch.manual_seed(0)
    seq_mask = torch.ones(B, T)
    seq_mask[-1, -1] = 0.0                                                          # the last batch's residue padded
    mask = seq_mask[:, :, None] * seq_mask[:, None, :]                              # (B, T, T)
    return PairStack(D, H, bug).eval(), (torch.randn(B, T, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
