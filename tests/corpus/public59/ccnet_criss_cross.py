"""Serge-weihao/CCNet-Pure-Pytorch, networks/CC.py (``INF``, ``CC_module``; a pure-PyTorch port of speedinghzl/CCNet's
criss-cross attention, written in place of its CUDA ``ca_weight``/``ca_map`` kernels and copied by many later
repositories): every pixel attends the pixels of its own column and its own row. 1 x 1 ``Conv2d`` ``query_conv`` and
``key_conv`` to ``in_dim // 8``, ``value_conv`` to ``in_dim``; the column branch folds the width into the batch
(``permute(0, 3, 1, 2).contiguous().view(m_batchsize*width, -1, height)``), the row branch the height
(``permute(0, 2, 1, 3) ... view(m_batchsize*height, -1, width)``); ``energy_H = bmm(proj_query_H, proj_key_H) +
INF(...)`` (``-inf`` on the diagonal, so the pixel itself is counted once, by the row branch) viewed
``(m_batchsize, width, height, height)`` and permuted to ``(B, H, W, H)``; ``energy_W`` ``(B, H, W, W)``; one
``Softmax(dim=3)`` over ``cat([energy_H, energy_W], 3)``; ``att_H = concate[..., :height].permute(0, 2, 1, 3)
.view(m_batchsize*width, height, height)``; ``out_H = bmm(proj_value_H, att_H.permute(0, 2, 1)).view(m_batchsize,
width, -1, height).permute(0, 2, 3, 1)``; ``gamma * (out_H + out_W) + x`` (``gamma`` starts at 0; build sets it to
a trained-like 0.5 so the branch counts).

Bugs: ``att-h-not-permuted-back``: ``concate[:, :, :, 0:height].contiguous().view(m_batchsize*width, height,
height)`` without ``permute(0, 2, 1, 3)`` (the ``(B, H, W, ·)`` weights read as ``(B, W, H, ·)``: column ``x`` of
image ``b`` takes the weights of other pixels); ``query-w-from-h-permute``: ``proj_query_W`` folded with the
column branch's ``permute(0, 3, 1, 2)`` and the row branch's ``view(m_batchsize*height, -1, width)`` (a copy-paste
slip: the row queries are a scramble of column queries); ``no-inf-diagonal``: ``energy_H`` without ``INF`` (the
pixel itself appears in both branches and gets two logits in one softmax: the CPU ports that drop the ``.cuda()``
helper)."""

import sys

import torch
from torch import nn
from torch.nn import Softmax


def INF(B, H, W):  # noqa: N802, N803
    return -torch.diag(torch.tensor(float("inf")).repeat(H), 0).unsqueeze(0).repeat(B * W, 1, 1)   # (B*W, H, H)


class CC_module(nn.Module):  # noqa: N801
    def __init__(self, in_dim, bug=""):
        super().__init__()
        self.query_conv = nn.Conv2d(in_channels=in_dim, out_channels=in_dim // 8, kernel_size=1)
        self.key_conv = nn.Conv2d(in_channels=in_dim, out_channels=in_dim // 8, kernel_size=1)
        self.value_conv = nn.Conv2d(in_channels=in_dim, out_channels=in_dim, kernel_size=1)
        self.softmax = Softmax(dim=3)
        self.INF = INF
        self.gamma = nn.Parameter(torch.zeros(1))
        self.bug = bug

    def forward(self, x):
        m_batchsize, _, height, width = x.size()
        proj_query = self.query_conv(x)
        proj_query_H = proj_query.permute(0, 3, 1, 2).contiguous().view(m_batchsize * width, -1, height) \
            .permute(0, 2, 1)                                                        # (B*W, H, C/8)
        if self.bug == "query-w-from-h-permute":
            proj_query_W = proj_query.permute(0, 3, 1, 2).contiguous().view(m_batchsize * height, -1, width) \
                .permute(0, 2, 1)                                                    # (B*H, W, C/8)
        else:
            proj_query_W = proj_query.permute(0, 2, 1, 3).contiguous().view(m_batchsize * height, -1, width) \
                .permute(0, 2, 1)                                                    # (B*H, W, C/8)
        proj_key = self.key_conv(x)
        proj_key_H = proj_key.permute(0, 3, 1, 2).contiguous().view(m_batchsize * width, -1, height)   # (B*W, C/8, H)
        proj_key_W = proj_key.permute(0, 2, 1, 3).contiguous().view(m_batchsize * height, -1, width)   # (B*H, C/8, W)
        proj_value = self.value_conv(x)
        proj_value_H = proj_value.permute(0, 3, 1, 2).contiguous().view(m_batchsize * width, -1, height)  # (B*W, C, H)
        proj_value_W = proj_value.permute(0, 2, 1, 3).contiguous().view(m_batchsize * height, -1, width)  # (B*H, C, W)
        energy_H = torch.bmm(proj_query_H, proj_key_H)                               # (B*W, H, H)
        if self.bug != "no-inf-diagonal":
            energy_H = energy_H + self.INF(m_batchsize, height, width)
        energy_H = energy_H.view(m_batchsize, width, height, height).permute(0, 2, 1, 3)   # (B, H, W, H)
        energy_W = torch.bmm(proj_query_W, proj_key_W).view(m_batchsize, height, width, width)   # (B, H, W, W)
        concate = self.softmax(torch.cat([energy_H, energy_W], 3))                   # (B, H, W, H+W)
        if self.bug == "att-h-not-permuted-back":
            att_H = concate[:, :, :, 0:height].contiguous().view(m_batchsize * width, height, height)
        else:
            att_H = concate[:, :, :, 0:height].permute(0, 2, 1, 3).contiguous() \
                .view(m_batchsize * width, height, height)                           # (B*W, H, H)
        att_W = concate[:, :, :, height:height + width].contiguous().view(m_batchsize * height, width, width)
        out_H = torch.bmm(proj_value_H, att_H.permute(0, 2, 1)).view(m_batchsize, width, -1, height) \
            .permute(0, 2, 3, 1)                                                     # (B, C, H, W)
        out_W = torch.bmm(proj_value_W, att_W.permute(0, 2, 1)).view(m_batchsize, height, -1, width) \
            .permute(0, 2, 1, 3)                                                     # (B, C, H, W)
        return self.gamma * (out_H + out_W) + x


BUGS = ("att-h-not-permuted-back", "query-w-from-h-permute", "no-inf-diagonal")
TWINS = ()
DIMS = ("B=2 D=64 Hp=5 Wp=7",)
EQUAL = {DIMS[0]: "B=4 D=64 Hp=4 Wp=4"}


def build(bug="", B=2, D=64, Hp=5, Wp=7):  # noqa: N803
    """The reduced backbone map (``D`` channels on ``Hp x Wp``); ``gamma`` set as after training."""
    torch.manual_seed(0)
    model = CC_module(D, bug)
    nn.init.constant_(model.gamma, 0.5)
    return model.eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
