"""lucidrains/graph-transformer-pytorch PR #2 ("fix mask bug in batch setting"; tachim: "The original
implementation accidentally assumes batch size 1 here, and the mask's batch dimension (1) is automatically
broadcast to the # of heads. If batch size is greater than 1, we have to handle that explicitly by copying it
once for each head."; lucidrains: "Thanks for catching this bug! I put in a quick fix", db6b82e): the node
mask ``(b, n)`` made pairwise, ``rearrange(mask, 'b i -> b i ()') & rearrange(mask, 'b j -> b () j')``
``(b, i, j)``, then applied to scores with a heads axis: broadcasting puts the mask's batch axis against the
heads. The fix gives the mask its own heads axis (``b () i j``, or ``repeat(..., '(b h) i j')``).

Here the scores keep their heads axis ``(b, h, i, j)`` (the repository folds heads into the batch, where the
same slip raises unless b = 1); the mask ``(b, i, j)`` then broadcasts as ``(1, b, i, j)``: silently, with
batch row ``b`` masking head ``b`` of every graph, wherever b = h (the file's B = H = 4). The idiom:
``to_q``/``to_kv``/``edges_to_kv``, ``rearrange(t, 'b ... (h d) -> b h ... d')``, edge features added to keys
and values, ``masked_fill_(~mask, -finfo.max)``, ``softmax``, ``to_out``. Nodes N = T, the last graph padded.

Bug (argument): ``mask-over-heads``: the pairwise mask without its heads axis."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn

BUGS = ("mask-over-heads",)
TWINS = ()
DIMS = ("B=4 T=6 D=32 H=4",)
EQUAL = {"B=4 T=6 D=32 H=4": "B=4 T=4 D=32 H=4"}


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.scale = (dim // heads) ** -0.5
        self.to_q = nn.Linear(dim, dim)
        self.to_kv = nn.Linear(dim, dim * 2)
        self.edges_to_kv = nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, nodes, edges, mask):
        h = self.heads
        q = self.to_q(nodes)
        k, v = self.to_kv(nodes).chunk(2, dim=-1)
        e_kv = self.edges_to_kv(edges)                                       # (b, i, j, h·d)
        q, k, v, e_kv = (rearrange(t, "b ... (h d) -> b h ... d", h=h) for t in (q, k, v, e_kv))
        k = k.unsqueeze(2) + e_kv                                            # (b, h, i, j, d)
        v = v.unsqueeze(2) + e_kv
        sim = einsum("b h i d, b h i j d -> b h i j", q, k) * self.scale
        mask = rearrange(mask, "b i -> b i ()") & rearrange(mask, "b j -> b () j")   # (b, i, j)
        if self.bug != "mask-over-heads":
            mask = rearrange(mask, "b i j -> b () i j")                      # [mask]
        sim = sim.masked_fill(~mask, -torch.finfo(sim.dtype).max)            # [fill]
        attn = sim.softmax(dim=-1)
        out = einsum("b h i j, b h i j d -> b h i d", attn, v)
        out = rearrange(out, "b h n d -> b n (h d)")
        return self.to_out(out)


def build(bug="", B=4, T=6, D=32, H=4):
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[-1, -2:] = False                                                    # the last graph has T - 2 nodes
    return Attention(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, T, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
