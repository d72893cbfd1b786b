"""lucidrains/MEGABYTE-pytorch, megabyte_pytorch/megabyte.py (v0.3, ``MEGABYTE.forward``), after Yu et al. 2023
("MEGABYTE: Predicting Million-byte Sequences with Multiscale Transformers", section 2): bytes ``(B, T)``
embedded, ``T = K * P`` (K patches of P bytes); the global model reads the patches shifted right by one patch (a
learnt start patch, the last patch dropped), ``rearrange(x, 'b (k p) d -> b k (p d)')`` ``(B, K, P*D)``, causal
attention over the patches; its output ``rearrange(g, 'b k (p d) -> (b k) p d')`` is added to the local
model's input, the bytes of each patch shifted right by one byte inside the patch (a learnt start byte),
``(B*K, P, D)``; causal attention inside each patch; the logits ``rearrange(..., '(b k) p v -> b (k p) v')``.
Both attentions are the plain ``q.view(B, T, H, d).transpose(1, 2)`` with a ``triu`` mask.

Bugs (argument): ``global-not-shifted``: the global model reads the patches unshifted (patch k's own bytes
predict patch k: every byte sees the bytes after it in its patch through the global model, the leak the
paper's shift prevents); ``patches-strided``: ``rearrange(x, 'b (p k) d -> b k (p d)')`` (the patches cut as
every K-th byte, the fold's factors read in the other order)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv, self.out = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):                                                          # (B, T, D)
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm(x)).split(D, dim=-1)
        q = q.view(B, T, self.heads, self.head_dim).transpose(1, 2)                  # (B, H, T, d)
        k = k.view(B, T, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.heads, self.head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.head_dim**-0.5
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return x + self.out(y.transpose(1, 2).contiguous().view(B, T, D))


class MEGABYTE(nn.Module):
    def __init__(self, dim, heads, patch_size, vocab=256, bug=""):
        super().__init__()
        self.patch_size, self.bug = patch_size, bug
        self.global_emb, self.local_emb = nn.Embedding(vocab, dim), nn.Embedding(vocab, dim)
        self.global_start = nn.Parameter(torch.randn(patch_size * dim))
        self.local_start = nn.Parameter(torch.randn(dim))
        self.global_attn = CausalAttention(patch_size * dim, heads)
        self.local_attn = CausalAttention(dim, heads)
        self.to_logits = nn.Linear(dim, vocab)

    def forward(self, ids):                                                        # (B, T)
        B, P = ids.shape[0], self.patch_size
        pattern = "b (p k) d -> b k (p d)" if self.bug == "patches-strided" else "b (k p) d -> b k (p d)"
        patches = rearrange(self.global_emb(ids), pattern, p=P)                      # (B, K, P*D)
        if self.bug != "global-not-shifted":
            start = self.global_start.expand(B, 1, -1)
            patches = torch.cat((start, patches[:, :-1]), dim=1)
        g = self.global_attn(patches)                                                # (B, K, P*D)
        g = rearrange(g, "b k (p d) -> (b k) p d", p=P)                               # (B*K, P, D)
        local = rearrange(self.local_emb(ids), "b (k p) d -> (b k) p d", p=P)
        start = self.local_start.expand(local.shape[0], 1, -1)
        local = torch.cat((start, local[:, :-1]), dim=1) + g
        out = self.local_attn(local)                                                 # (B*K, P, D)
        return rearrange(self.to_logits(out), "(b k) p v -> b (k p) v", b=B)


BUGS = ("global-not-shifted", "patches-strided")
TWINS = ()
DIMS = ("B=2 T=12 D=16 H=4",)
EQUAL = {"B=2 T=12 D=16 H=4": "B=4 T=16 D=16 H=4"}


def build(bug="", B=2, T=12, D=16, H=4):
    torch.manual_seed(0)
    return MEGABYTE(D, H, 3 if T % 3 == 0 else 4, bug=bug).eval(), (torch.randint(0, 256, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
