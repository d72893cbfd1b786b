"""lucidrains/lambda-networks, ``lambda_networks/lambda_networks.py`` (v0.4.0, ``LambdaLayer`` with a global
position embedding, after Bello's LambdaNetworks): queries ``to_q`` (1x1 convolution to ``heads * dim_k``, then
``BatchNorm2d``), keys ``to_k`` to ``dim_u * dim_k`` and values ``to_v`` to ``dim_u * dim_v`` (``dim_v = dim_out //
heads``, one set shared by all heads); ``rearrange('b (h k) hh ww -> b h k (hh ww)')`` and the same with ``u`` for
keys and values; the keys normalised over the context positions ``k.softmax(dim=-1)``; the content lambda
``einsum('b u k m, b u v m -> b k v')`` and its output ``einsum('b h k n, b k v -> b h v n')``; the position
lambdas ``einsum('n m k u, b u v m -> b n k v')`` from a learned ``(n, m, dim_k, dim_u)`` table and their output
``einsum('b h k n, b n k v -> b h v n')``; ``Y = Yc + Yp``, ``rearrange('b h v (hh ww) -> b (h v) hh ww')``.

Bugs: ``keys-softmax-over-width``: ``k.softmax(dim=-2)`` (the keys normalised over their ``dim_k`` features instead
of the context positions, the slip of the repository's issue on which axis the "normalised keys" of the paper's
Figure 3 mean); ``output-grid-transposed``: ``rearrange(Y, 'b h v (ww hh) -> b (h v) hh ww')`` (the positions read
back column-major: each output pixel carries another position's result)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class LambdaLayer(nn.Module):
    def __init__(self, dim, *, dim_k, n, heads=4, dim_out=None, dim_u=1, bug=""):
        super().__init__()
        self.bug = bug
        dim_out = dim_out or dim
        self.u, self.heads = dim_u, heads
        dim_v = dim_out // heads
        self.to_q = nn.Conv2d(dim, dim_k * heads, 1, bias=False)
        self.to_k = nn.Conv2d(dim, dim_k * dim_u, 1, bias=False)
        self.to_v = nn.Conv2d(dim, dim_v * dim_u, 1, bias=False)
        self.norm_q = nn.BatchNorm2d(dim_k * heads)
        self.norm_v = nn.BatchNorm2d(dim_v * dim_u)
        self.pos_emb = nn.Parameter(torch.randn(n, n, dim_k, dim_u))

    def forward(self, x):
        _, _, hh, ww, u, h = *x.shape, self.u, self.heads
        q, k, v = self.norm_q(self.to_q(x)), self.to_k(x), self.norm_v(self.to_v(x))
        q = rearrange(q, 'b (h k) hh ww -> b h k (hh ww)', h=h)
        k = rearrange(k, 'b (u k) hh ww -> b u k (hh ww)', u=u)
        v = rearrange(v, 'b (u v) hh ww -> b u v (hh ww)', u=u)
        k = k.softmax(dim=-2 if self.bug == "keys-softmax-over-width" else -1)
        λc = einsum('b u k m, b u v m -> b k v', k, v)
        Yc = einsum('b h k n, b k v -> b h v n', q, λc)
        λp = einsum('n m k u, b u v m -> b n k v', self.pos_emb, v)
        Yp = einsum('b h k n, b n k v -> b h v n', q, λp)
        Y = Yc + Yp
        if self.bug == "output-grid-transposed":
            return rearrange(Y, 'b h v (ww hh) -> b (h v) hh ww', hh=hh, ww=ww)
        return rearrange(Y, 'b h v (hh ww) -> b (h v) hh ww', hh=hh, ww=ww)


BUGS = ("keys-softmax-over-width", "output-grid-transposed")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    model = LambdaLayer(D, dim_k=16, n=Hp * Wp, heads=H, bug=bug).eval()
    return model, (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
