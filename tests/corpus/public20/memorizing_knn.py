"""lucidrains/memorizing-transformers-pytorch, memorizing_transformers_pytorch/memorizing_transformers_pytorch.py
(``KNNAttention``, 0.4): ``q = to_q(x)`` split into heads, one shared key/value head ``k, v = to_kv(x).chunk(2,
dim=-1)``; local attention ``sim = einsum('b h i d, b j d -> b h i j', q, k) * scale`` with a causal mask
``triu(j - i + 1)`` filled with ``-finfo.max``; the kNN memories ``mem_kv`` ``(B, T, topk, 2, d)`` found for
each query, ``sim_mem = einsum('b h i d, b i j d -> b h i j', q, mem_k) * scale``; both softmaxed each over
its own keys, ``local_out = einsum('b h i j, b j d -> b h i d', attn, v)``, ``mem_out = einsum('b h i j, b i j d
-> b h i d', attn_mem, mem_v)``; a learnt per-head gate ``combine_attn_output_gate`` ``(H, 1, 1)``: ``out =
local_out * gate + mem_out * (1 - gate)``; ``rearrange('b h n d -> b n (h d)')``; ``to_out``. (The memory
look-up itself, a faiss index, is stood in for by a random ``mem_kv`` input.)

Bugs (argument): ``mem-softmax-over-queries``: ``sim_mem.softmax(dim=-2)`` (the memory scores normalised over
the queries, a natural slip of the axis); ``causal-mask-transposed``: ``tril(j - i + 1)`` where ``triu`` is
meant (each query sees the keys after it: a natural slip)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class KNNAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.dim_head = dim // heads
        self.scale = self.dim_head**-0.5
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, 2 * self.dim_head, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)
        self.combine_attn_output_gate = nn.Parameter(torch.randn(heads, 1, 1))

    def forward(self, x, mem_kv):                                                  # (B, T, D), (B, T, k, 2, d)
        q = rearrange(self.to_q(x), "b n (h d) -> b h n d", h=self.heads) * self.scale
        k, v = self.to_kv(x).chunk(2, dim=-1)                                      # (B, T, d)
        sim = einsum("b h i d, b j d -> b h i j", q, k)
        i, j = sim.shape[-2:]
        band = torch.ones((i, j), dtype=torch.bool)
        causal_mask = band.tril(j - i + 1) if self.bug == "causal-mask-transposed" else band.triu(j - i + 1)
        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)
        mem_k, mem_v = mem_kv.unbind(dim=-2)                                       # (B, T, k, d)
        sim_mem = einsum("b h i d, b i j d -> b h i j", q, mem_k)
        attn = sim.softmax(dim=-1)
        attn_mem = sim_mem.softmax(dim=-2 if self.bug == "mem-softmax-over-queries" else -1)
        local_out = einsum("b h i j, b j d -> b h i d", attn, v)
        mem_out = einsum("b h i j, b i j d -> b h i d", attn_mem, mem_v)
        gate = self.combine_attn_output_gate.sigmoid()
        out = local_out * gate + mem_out * (1 - gate)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


BUGS = ("mem-softmax-over-queries", "causal-mask-transposed")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return KNNAttention(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, T, 3, 2, D // H))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
