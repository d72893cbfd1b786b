"""lucidrains/tab-transformer-pytorch, tab_transformer_pytorch/tab_transformer_pytorch.py (``TabTransformer``,
``Attention``, 0.3): categorical columns ``x_categ`` ``(B, n)`` shifted by ``categories_offset`` (the running
sum of the category counts, so each column has its own rows of one shared ``nn.Embedding``); ``Attention``:
``q, k, v = to_qkv(x).chunk(3, dim=-1)``, ``rearrange(t, 'b n (h d) -> b h n d', h=h)``, ``sim = einsum('b h i d,
b h j d -> b h i j', q, k) * scale``, ``softmax(dim=-1)``, ``einsum('b h i j, b h j d -> b h i d')``,
``rearrange('b h n d -> b n (h d)')``, ``to_out``; then ``flatten(1)`` of the contextual embeddings joined with
the layer-normed continuous features for the MLP.

Bugs (argument): ``softmax-over-queries``: ``sim.softmax(dim=-2)`` (a natural slip of the axis);
``embed-without-offset``: ``category_embed(x_categ)`` without ``categories_offset`` (every column reads the
first rows of the shared table, so category 1 of each column is one vector: a natural slip; value-level, the
shapes are those of the correct file). (A head merge ``(d h)`` read by ``to_out`` is not among the bugs: a
fixed reordering of a learnt linear's inputs is absorbed by its weight.)"""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class Attention(nn.Module):
    def __init__(self, dim, heads, dim_head, bug=""):
        super().__init__()
        self.heads, self.scale, self.bug = heads, dim_head**-0.5, bug
        self.to_qkv = nn.Linear(dim, heads * dim_head * 3, bias=False)
        self.to_out = nn.Linear(heads * dim_head, dim)

    def forward(self, x):                                                          # (B, n, D)
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in (q, k, v))
        sim = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
        attn = sim.softmax(dim=-2 if self.bug == "softmax-over-queries" else -1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


class TabTransformer(nn.Module):
    def __init__(self, categories, num_continuous, dim, heads, bug=""):
        super().__init__()
        offsets = torch.tensor([0, *categories[:-1]]).cumsum(dim=-1)
        self.register_buffer("categories_offset", offsets)
        self.category_embed = nn.Embedding(sum(categories), dim)
        self.bug = bug
        self.attn = Attention(dim, heads, dim // heads, bug)
        self.norm = nn.LayerNorm(num_continuous)
        self.mlp = nn.Linear(dim * len(categories) + num_continuous, 1)

    def forward(self, x_categ, x_cont):                                            # (B, n), (B, c)
        index = x_categ if self.bug == "embed-without-offset" else x_categ + self.categories_offset
        x = self.category_embed(index)                                             # (B, n, D)
        x = x + self.attn(x)
        flat_categ = x.flatten(1)
        return self.mlp(torch.cat((flat_categ, self.norm(x_cont)), dim=-1))


BUGS = ("softmax-over-queries", "embed-without-offset")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    categories = tuple(3 + i for i in range(T))
    x_categ = torch.stack([torch.randint(0, c, (B,)) for c in categories], dim=1)
    return TabTransformer(categories, 3, D, H, bug).eval(), (x_categ, torch.randn(B, 3))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
