"""lucidrains/axial-attention, ``axial_attention/axial_attention.py`` (v0.6, ``PermuteToFrom``,
``SelfAttention``, ``AxialAttention`` with ``dim_index=1``, ``num_dimensions=2``, ``sum_axial_out=True``): for
each spatial axis, the feature map permuted so that axis and the channels come last
(``x.permute(*self.permutation).contiguous()``), every other axis folded into the batch
(``reshape(-1, t, d)``); a self-attention over that axis alone (``to_q``, ``to_kv(...).chunk(2, dim=-1)``, heads
merged into the batch: ``x.reshape(b, -1, h, e).transpose(1, 2).reshape(b * h, -1, e)``; ``einsum('bie,bje->bij')
* e ** -0.5``, ``softmax(dim=-1)``, ``einsum('bij,bje->bie')``, heads split back ``reshape(b, h, -1,
e).transpose(1, 2).reshape(b, -1, d)``, ``to_out``); unfolded and permuted back with the inverse permutation;
the two axes' outputs summed.

Bugs: ``heads-split-without-transpose``: the heads merged ``x.reshape(b * h, -1, e)`` straight from ``(b, t, h *
e)`` (the ``transpose(1, 2)`` dropped: each head's rows mix tokens and head slices); ``softmax-over-queries``:
``dots.softmax(dim=1)`` (in the heads-folded ``(b * h, i, j)`` layout dim 1 is the queries: each key's weights
normalised over the queries)."""

import sys

import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.dim_heads, self.heads, self.bug = dim // heads, heads, bug
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, 2 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim=-1))
        b, _, d, h, e = *q.shape, self.heads, self.dim_heads

        def merge_heads(x):
            if self.bug == "heads-split-without-transpose":
                return x.reshape(b * h, -1, e)
            return x.reshape(b, -1, h, e).transpose(1, 2).reshape(b * h, -1, e)

        q, k, v = map(merge_heads, (q, k, v))
        dots = torch.einsum("bie,bje->bij", q, k) * (e ** -0.5)
        dots = dots.softmax(dim=1 if self.bug == "softmax-over-queries" else -1)
        out = torch.einsum("bij,bje->bie", dots, v)
        out = out.reshape(b, h, -1, e).transpose(1, 2).reshape(b, -1, d)
        return self.to_out(out)


class PermuteToFrom(nn.Module):
    def __init__(self, permutation, fn):
        super().__init__()
        self.fn = fn
        _, inv_permutation = zip(*sorted((p, i) for i, p in enumerate(permutation)))
        self.permutation = permutation
        self.inv_permutation = inv_permutation

    def forward(self, x):
        axial = x.permute(*self.permutation).contiguous()
        shape = axial.shape
        *_, t, d = shape
        axial = axial.reshape(-1, t, d)
        axial = self.fn(axial)
        axial = axial.reshape(*shape)
        return axial.permute(*self.inv_permutation).contiguous()


class AxialAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        # (B, C, Hp, Wp): attend along Hp (the others folded), then along Wp
        self.axial_attentions = nn.ModuleList([
            PermuteToFrom((0, 3, 2, 1), SelfAttention(dim, heads, bug)),
            PermuteToFrom((0, 2, 3, 1), SelfAttention(dim, heads, bug)),
        ])

    def forward(self, x):
        return sum(axial_attn(x) for axial_attn in self.axial_attentions)


BUGS = ("heads-split-without-transpose", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return AxialAttention(D, H, bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
