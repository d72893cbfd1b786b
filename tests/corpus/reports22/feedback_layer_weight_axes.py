"""lucidrains/feedback-transformer-pytorch issue #8 ("Bug in weighted sum", closed: "thanks Victor! fixed in the
latest release"; Victor0118: "Should be ``layer_weight = rearrange(layer_weight, 'd -> d () () ()')``"): the
Feedback Transformer stores one memory per step, a softmax-weighted sum of every layer's hidden states. The
hiddens are stacked to ``[depth, b, n, dim]`` and multiplied by the layer weights before ``sum(dim=0)``; the
weights were rearranged ``'d -> d () ()'``, three axes against the hiddens' four, so broadcasting aligned the
depth weights with the batch axis: with ``b == depth`` it runs, every layer summed with weight 1 and each batch
row scaled by one layer's weight (otherwise it raises). The fix adds the fourth axis.

The idiom: ``self.layer_weight = nn.Parameter(torch.ones(depth))``, ``softmax(dim=-1)``, ``rearrange``, the
layers' inputs collected in ``hiddens`` and ``torch.stack``ed, the memory keys/values from ``to_mem_kv(agg)
.chunk(2, dim=-1)``, and the next segment's queries attending over the memory (einops ``rearrange`` to heads,
``einsum``). Here depth = 2 (the batch of DIMS is 2: the bug runs).

Bug (broadcast): ``weight-three-axes``: ``rearrange(w, 'd -> d () ()')``."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn

BUGS = ("weight-three-axes",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class FeedForward(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))

    def forward(self, x):
        return x + self.net(x)


class FeedbackMemory(nn.Module):
    def __init__(self, dim, heads, depth=2, bug=""):
        super().__init__()
        self.heads = heads
        self.dim_head = dim // heads
        self.bug = bug
        self.layers = nn.ModuleList([FeedForward(dim) for _ in range(depth)])
        self.layer_weight = nn.Parameter(torch.randn(depth))
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_mem_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, nxt):
        layer_weight = self.layer_weight.softmax(dim=-1)
        if self.bug == "weight-three-axes":
            layer_weight = rearrange(layer_weight, "d -> d () ()")
        else:
            layer_weight = rearrange(layer_weight, "d -> d () () ()")
        hiddens = []
        for ff in self.layers:
            hiddens.append(x)
            x = ff(x)
        hiddens = torch.stack(hiddens)
        agg_hiddens = (hiddens * layer_weight).sum(dim=0)
        mem_k, mem_v = self.to_mem_kv(agg_hiddens).chunk(2, dim=-1)

        h = self.heads
        q = rearrange(self.to_q(nxt), "b n (h d) -> b h n d", h=h)
        k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in (mem_k, mem_v))
        sim = einsum("b h i d, b h j d -> b h i j", q, k) * self.dim_head ** -0.5
        attn = sim.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return FeedbackMemory(D, H, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(B, T, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
