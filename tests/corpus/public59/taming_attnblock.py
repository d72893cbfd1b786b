"""CompVis/taming-transformers, taming/modules/diffusionmodules/model.py (``AttnBlock``, with ``Normalize``): the
single-head spatial self-attention of the VQGAN encoder and decoder (copied unchanged into CompVis/latent-diffusion
and Stable Diffusion's first-stage autoencoder, ldm/modules/diffusionmodules/model.py). ``GroupNorm(32)``; 1 x 1
``Conv2d`` ``q``, ``k``, ``v``; ``q.reshape(b, c, h*w).permute(0, 2, 1)`` (``b,hw,c``), ``k.reshape(b, c, h*w)``
(``b,c,hw``); ``w_ = torch.bmm(q, k)`` (``w[b,i,j] = sum_c q[b,i,c] k[b,c,j]``); ``w_ * int(c) ** -0.5``;
``softmax(w_, dim=2)`` over the keys; ``v.reshape(b, c, h*w)``, ``w_.permute(0, 2, 1)`` (keys first) and
``h_ = torch.bmm(v, w_)`` (``h_[b,c,j] = sum_i v[b,c,i] w_[b,i,j]``); ``h_.reshape(b, c, h, w)``, ``proj_out``,
``x + h_``.

Bugs: ``no-weight-transpose``: ``torch.bmm(v, w_)`` without ``w_.permute(0, 2, 1)`` (the value product then sums
over the queries: output pixel ``j`` is a mix weighted by the column ``w[:, j]`` of the attention, which is no
distribution); ``softmax-over-queries``: ``softmax(w_, dim=1)`` (each key's weights sum to one over the queries);
``keys-column-major``: ``k.transpose(2, 3).reshape(b, c, h*w)`` (keys flattened width-first, the queries and values
row-major: query ``i`` scores key pixel ``(x, y)`` but takes the value of pixel ``(y, x)``'s slot)."""

import sys

import torch
from torch import nn


def Normalize(in_channels):  # noqa: N802
    return torch.nn.GroupNorm(num_groups=32, num_channels=in_channels, eps=1e-6, affine=True)


class AttnBlock(nn.Module):
    def __init__(self, in_channels, bug=""):
        super().__init__()
        self.in_channels, self.bug = in_channels, bug
        self.norm = Normalize(in_channels)
        self.q = torch.nn.Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)
        self.k = torch.nn.Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)
        self.v = torch.nn.Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)
        self.proj_out = torch.nn.Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, x):
        h_ = x
        h_ = self.norm(h_)
        q = self.q(h_)
        k = self.k(h_)
        v = self.v(h_)

        # compute attention
        b, c, h, w = q.shape
        q = q.reshape(b, c, h * w)                                                   # (b, c, hw)
        q = q.permute(0, 2, 1)                                                       # (b, hw, c)
        if self.bug == "keys-column-major":
            k = k.transpose(2, 3).reshape(b, c, h * w)                               # (b, c, wh)
        else:
            k = k.reshape(b, c, h * w)                                               # (b, c, hw)
        w_ = torch.bmm(q, k)                                                         # (b, hw, hw)
        w_ = w_ * (int(c) ** (-0.5))
        w_ = torch.nn.functional.softmax(w_, dim=1 if self.bug == "softmax-over-queries" else 2)

        # attend to values
        v = v.reshape(b, c, h * w)                                                   # (b, c, hw)
        if self.bug != "no-weight-transpose":
            w_ = w_.permute(0, 2, 1)                                                 # (b, hw of k, hw of q)
        h_ = torch.bmm(v, w_)                                                        # (b, c, hw of q)
        h_ = h_.reshape(b, c, h, w)                                                  # (b, c, h, w)

        h_ = self.proj_out(h_)
        return x + h_


BUGS = ("no-weight-transpose", "softmax-over-queries", "keys-column-major")
TWINS = ()
DIMS = ("B=2 D=32 Hp=3 Wp=5",)
EQUAL = {DIMS[0]: "B=4 D=32 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, Hp=3, Wp=5):  # noqa: N803
    """A decoder feature map at its lowest resolution: ``D`` channels on an ``Hp x Wp`` grid."""
    torch.manual_seed(0)
    return AttnBlock(D, bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
