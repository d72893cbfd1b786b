"""xmu-xiaoma666/External-Attention-pytorch issue #18 ("Maybe an error in SKAttention？", confirmed by the
author: "对的，确实写错了，已修改", fixed): ``SKAttention`` (selective kernel attention) stacks one
attention vector per branch, ``attention_weughts`` of shape ``(k, bs, channel, 1, 1)``, and must softmax
them over the ``k`` branches so that each channel's branch weights sum to one; the module was built with
``nn.Softmax(dim=1)``, a softmax over the batch: each sample's weights depended on the other samples in
the batch, and the branches were no longer a convex combination. The fix is ``nn.Softmax(dim=0)``.

The repository's idiom: ``k`` convolution branches (kernels 1, 3, 5) with BatchNorm and ReLU, their
outputs stacked on a new axis 0, ``U = sum(0)``, ``S = U.mean(-1).mean(-1)``, ``Z = fc(S)``, one
``Linear`` per branch viewed ``(bs, c, 1, 1)``, stacked on axis 0, the softmax, then ``(weights *
feats).sum(0)``.

Bug (argument): ``softmax-batch``: ``nn.Softmax(dim=1)``."""

import sys

import torch
from torch import nn

BUGS = ("softmax-batch",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class SKAttention(nn.Module):
    def __init__(self, channel=32, kernels=(1, 3, 5), reduction=4, L=8, bug=""):
        super().__init__()
        self.d = max(L, channel // reduction)
        self.convs = nn.ModuleList(
            nn.Sequential(nn.Conv2d(channel, channel, kernel_size=k, padding=k // 2),
                          nn.BatchNorm2d(channel), nn.ReLU()) for k in kernels)
        self.fc = nn.Linear(channel, self.d)
        self.fcs = nn.ModuleList(nn.Linear(self.d, channel) for _ in kernels)
        self.softmax = nn.Softmax(dim=1 if bug == "softmax-batch" else 0)

    def forward(self, x):
        bs, c, _, _ = x.size()
        conv_outs = [conv(x) for conv in self.convs]
        feats = torch.stack(conv_outs, 0)                                       # (k, bs, c, h, w)
        U = sum(conv_outs)                                                      # (bs, c, h, w)
        S = U.mean(-1).mean(-1)                                                 # (bs, c)
        Z = self.fc(S)                                                          # (bs, d)
        weights = [fc(Z).view(bs, c, 1, 1) for fc in self.fcs]
        attention_weughts = torch.stack(weights, 0)                             # (k, bs, c, 1, 1)
        attention_weughts = self.softmax(attention_weughts)                     # [softmax]
        return (attention_weughts * feats).sum(0)                               # (bs, c, h, w)


def build(bug="", B=2, D=32, T=6):
    torch.manual_seed(0)
    return SKAttention(D, bug=bug).eval(), (torch.randn(B, D, T, T),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
