"""Mixture-of-Depths (arXiv 2404.02258) routed as 0-5788719150923125/praxis ``PraxisMixtureOfDepths`` routes:
a one-output ``F.linear`` scores each token ``(B, T, 1)``, ``torch.topk(router_logits, k, dim=1, sorted=False)``
picks the capacity ``k = int(T * capacity)``, ``torch.sort(token_indices, dim=1)`` puts the picks back in
sequence order (and ``gather`` reorders their weights), ``token_indices.expand(-1, -1, d)`` gathers the picked
tokens ``(B, k, D)`` for a causal transformer block, and ``torch.scatter(inputs, 1, indices_expanded, outputs)``
writes them back into the residual stream; tokens not picked pass through.

Bug (causal order): ``indices-unsorted``: the sort left out ("required to maintain the causal nature", the
comment in praxis says of it), with ``topk`` returning the picks by router weight: the block's causal mask then
runs over the picks in weight order, so a picked token attends to picks that come after it in the sequence."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class CausalBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x, weights):                                                   # (B, k, D), (B, k, 1)
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)                                       # 3 x (B, k, D)
        q = q.view(b, n, self.heads, self.head_dim).transpose(1, 2)                  # (B, H, k, d_k)
        k = k.view(b, n, self.heads, self.head_dim).transpose(1, 2)                  # (B, H, k, d_k)
        v = v.view(b, n, self.heads, self.head_dim).transpose(1, 2)                  # (B, H, k, d_k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)                  # (B, H, k, d_k)
        y = y.transpose(1, 2).reshape(b, n, d)                                       # (B, k, D)
        return x + self.proj(y) * torch.sigmoid(weights)


class MixtureOfDepths(nn.Linear):
    def __init__(self, dim, heads, capacity=0.5, bug=""):
        super().__init__(dim, 1)
        self.capacity, self.bug = capacity, bug
        self.block = CausalBlock(dim, heads)

    def forward(self, inputs):                                                       # (B, T, D)
        b, s, d = inputs.shape
        k = int(s * self.capacity)
        router_logits = F.linear(inputs, self.weight, self.bias)                     # (B, T, 1)
        token_weights, token_indices = torch.topk(router_logits, k, dim=1)           # (B, k, 1) by weight
        if self.bug != "indices-unsorted":
            token_indices, sort_indices = torch.sort(token_indices, dim=1)           # (B, k, 1) by position
            token_weights = torch.gather(token_weights, 1, sort_indices)             # (B, k, 1)
        indices_expanded = token_indices.expand(-1, -1, d)                           # (B, k, D)
        picked = torch.gather(inputs, 1, indices_expanded)                           # (B, k, D)
        processed = self.block(picked, token_weights)                                # (B, k, D)
        return torch.scatter(inputs, 1, indices_expanded, processed)                 # (B, T, D)


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    return MixtureOfDepths(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


BUGS = ("indices-unsorted",)
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
