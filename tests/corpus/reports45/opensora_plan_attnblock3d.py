"""PKU-YuanGroup/Open-Sora-Plan issue #171 ("Bug report: AttnBlock3D reshape disorder"; fixed by pull request
#172, kept in the repository as ``AttnBlock3DFix``): the video VAE's ``AttnBlock3D.forward`` in
``opensora/models/ae/videobase/modules/attention.py`` took the ``(b, c, t, h, w)`` maps of the 1x1x1 convolutions
and did ``q.reshape(b * t, c, h * w)`` straight away. The reporter: "Without transposing T-axis, the values may
not be grouped correctly in reshaping"; the correct code permutes to ``(b, t, c, h, w)`` first (``q.permute(0, 2,
1, 3, 4)``), and the output goes back ``reshape(b, t, c, h, w).permute(0, 2, 1, 3, 4)``. The maintainer merged the
fix and noted the model may need re-training.

The idiom (the LDM ``AttnBlock`` made 3-d): ``Normalize`` (``GroupNorm(32, C)``), ``q``/``k``/``v``/``proj_out``
as 1x1x1 ``CausalConv3d`` (plain ``Conv3d`` here: a kernel of one needs no causal padding), per frame spatial
attention: ``q`` permuted to ``b*t, hw, c``, ``w_ = torch.bmm(q, k)`` (``b*t, hw, hw``), ``* int(c) ** (-0.5)``,
``softmax(w_, dim=2)``, ``w_.permute(0, 2, 1)`` and ``torch.bmm(v, w_)`` (``b*t, c, hw``), ``proj_out``, the
residual ``x + h_``.

Bugs: ``no-time-permute``: the reported ``AttnBlock3D`` (``reshape(b * t, c, h * w)`` from ``(b, c, t, h, w)``,
back ``reshape(b, c, t, h, w)``); ``weights-not-permuted``: ``torch.bmm(v, w_)`` without ``w_.permute(0, 2, 1)``
(each output position sums the weights of one key over the queries)."""

import sys

import torch
from torch import nn

BUGS = ("no-time-permute", "weights-not-permuted")
TWINS = ()
DIMS = ("B=2 C=32 T=3 Hp=4 Wp=5",)
EQUAL = {DIMS[0]: "B=4 C=32 T=4 Hp=4 Wp=4"}


def Normalize(in_channels):  # noqa: N802
    return nn.GroupNorm(num_groups=32, num_channels=in_channels, eps=1e-6, affine=True)


class AttnBlock3DFix(nn.Module):
    def __init__(self, in_channels, bug=""):
        super().__init__()
        self.in_channels, self.bug = in_channels, bug
        self.norm = Normalize(in_channels)
        self.q = nn.Conv3d(in_channels, in_channels, kernel_size=1, stride=1)
        self.k = nn.Conv3d(in_channels, in_channels, kernel_size=1, stride=1)
        self.v = nn.Conv3d(in_channels, in_channels, kernel_size=1, stride=1)
        self.proj_out = nn.Conv3d(in_channels, in_channels, kernel_size=1, stride=1)

    def forward(self, x):                                            # (b, c, t, h, w)
        h_ = self.norm(x)
        q, k, v = self.q(h_), self.k(h_), self.v(h_)

        # compute attention
        b, c, t, h, w = q.shape
        if self.bug == "no-time-permute":
            q = q.reshape(b * t, c, h * w)                           # (b*t, c, hw), t and c mixed
            k = k.reshape(b * t, c, h * w)
            v = v.reshape(b * t, c, h * w)
        else:
            q = q.permute(0, 2, 1, 3, 4).reshape(b * t, c, h * w)    # (b*t, c, hw)
            k = k.permute(0, 2, 1, 3, 4).reshape(b * t, c, h * w)    # (b*t, c, hw)
            v = v.permute(0, 2, 1, 3, 4).reshape(b * t, c, h * w)    # (b*t, c, hw)
        q = q.permute(0, 2, 1)                                       # (b*t, hw, c)
        w_ = torch.bmm(q, k)                                         # (b*t, hw_q, hw_k)
        w_ = w_ * (int(c) ** (-0.5))
        w_ = torch.nn.functional.softmax(w_, dim=2)

        # attend to values
        if self.bug != "weights-not-permuted":
            w_ = w_.permute(0, 2, 1)                                 # (b*t, hw_k, hw_q)
        h_ = torch.bmm(v, w_)                                        # (b*t, c, hw_q)
        if self.bug == "no-time-permute":
            h_ = h_.reshape(b, c, t, h, w)
        else:
            h_ = h_.reshape(b, t, c, h, w).permute(0, 2, 1, 3, 4)    # (b, c, t, h, w)
        return x + self.proj_out(h_)


def build(bug="", B=2, C=32, T=3, Hp=4, Wp=5):  # noqa: N803
    torch.manual_seed(0)
    return AttnBlock3DFix(C, bug).eval(), (torch.randn(B, C, T, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
