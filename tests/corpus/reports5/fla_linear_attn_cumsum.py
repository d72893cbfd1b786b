"""fla-org/flash-linear-attention issue #850 ("[Bug] Incorrect cumsum dim for naive impl of linear_attn", labelled
bug): the reference chunked linear attention divides its output by ``z = (q * k.cumsum(...)).sum(-1)``, each
query's dot product with the running sum of the keys up to it. The earlier version took that running sum over
the second-to-last axis, the tokens; a refactor changed it to the first axis after the batch, "the head
dimension": each head's normaliser became a running sum of the keys of the heads before it, at the same token.
The fix takes the cumsum over the tokens again.

fla's idiom: ``[B, H, T, D]`` head-first tensors, ``einops.rearrange(x, 'b h (n c) d -> b h n c d')`` into chunks,
the chunks' key-value states ``k.transpose(-1, -2) @ v`` summed with ``cumsum`` over the chunks and shifted by
one, the intra-chunk part masked with ``triu(ones(c, c), diagonal=1)``, ``normalize_output(q, k, o)``; q and k
through a positive feature map (``1 + elu``) first.

Bug (argument): ``cumsum-heads``: the normaliser's running sum over the heads."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("cumsum-heads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
CHUNK = 2


def normalize_output(q, k, o, bug=""):
    k = k.cumsum(1) if bug == "cumsum-heads" else k.cumsum(-2)              # [B, H, T, d] [cumsum]
    z = (q * k).sum(-1, keepdim=True)                                      # [B, H, T, 1]
    return o / (z + 1e-10)


def naive_chunk_linear_attn(q, k, v, chunk_size, bug=""):
    q_c = rearrange(q, "b h (n c) d -> b h n c d", c=chunk_size)
    k_c = rearrange(k, "b h (n c) d -> b h n c d", c=chunk_size)
    v_c = rearrange(v, "b h (n c) d -> b h n c d", c=chunk_size)
    kv = k_c.transpose(-1, -2) @ v_c                                       # [B, H, n, d, d]
    kv = kv.cumsum(2)
    kv = torch.cat([torch.zeros_like(kv[:, :, :1]), kv[:, :, :-1]], dim=2)  # the chunks before each
    inter = q_c @ kv                                                        # [B, H, n, c, d]
    mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool), diagonal=1)
    intra = (q_c @ k_c.transpose(-1, -2)).masked_fill(mask, 0) @ v_c        # [B, H, n, c, d]
    o = rearrange(inter + intra, "b h n c d -> b h (n c) d")
    return normalize_output(q, k, o, bug)


class LinearAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, hidden_size // num_heads, bug
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states):
        q = rearrange(self.q_proj(hidden_states), "b t (h d) -> b h t d", h=self.num_heads)
        k = rearrange(self.k_proj(hidden_states), "b t (h d) -> b h t d", h=self.num_heads)
        v = rearrange(self.v_proj(hidden_states), "b t (h d) -> b h t d", h=self.num_heads)
        q, k = 1 + F.elu(q), 1 + F.elu(k)                                   # a positive feature map
        o = naive_chunk_linear_attn(q, k, v, CHUNK, self.bug)               # [B, H, T, d]
        return self.o_proj(rearrange(o, "b h t d -> b t (h d)"))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return LinearAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
