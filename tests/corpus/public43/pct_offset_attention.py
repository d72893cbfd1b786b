"""MenghaoGuo/PCT, networks/cls/pct.py (``SA_Layer`` and ``Point_Transformer_Last``, commit 0e3429a; Jittor, as in
its PyTorch port Strawberry-Eat-Mango/PCT_Pytorch, model.py): offset attention over the points of a channels-first
``(B, C, N)`` point cloud, one head. ``x_q = q_conv(x).permute(0, 2, 1)`` ``(B, N, C/4)``, ``x_k = k_conv(x)``
``(B, C/4, N)`` with the query and key convs sharing one weight; ``energy = bmm(x_q, x_k)`` ``(B, N, N)``,
``Softmax(dim=-1)``, then each column renormalised over the queries: ``attention / (1e-9 + attention.sum(dim=1,
keepdim=True))``; ``x_r = bmm(x_v, attention)`` ``(B, C, N)`` (the value's points contracted with the weights'
first axis); the offset ``trans_conv(x - x_r)``, BatchNorm, ReLU, a residual; two layers, their outputs joined on
the channels. The points play the tokens (``T``), the channels ``D``.

Bugs: ``query-reshaped-not-permuted``: ``x_q = q_conv(x).reshape(b, n, -1)`` for the ``permute(0, 2, 1)`` (a reshape
of the channels-first ``(B, C/4, N)``: each "point" row is a run of one channel over several points);
``values-channels-last``: ``x_r = bmm(attention, x_v.permute(0, 2, 1)).reshape(b, c, n)`` (the product written in
the usual ``weights @ values`` order, then read back to channels-first by a reshape instead of a permute)."""

import sys

import torch
from torch import nn


class SA_Layer(nn.Module):
    def __init__(self, channels, bug=""):
        super().__init__()
        self.bug = bug
        self.q_conv = nn.Conv1d(channels, channels // 4, 1, bias=False)
        self.k_conv = nn.Conv1d(channels, channels // 4, 1, bias=False)
        self.q_conv.weight = self.k_conv.weight
        self.v_conv = nn.Conv1d(channels, channels, 1)
        self.trans_conv = nn.Conv1d(channels, channels, 1)
        self.after_norm = nn.BatchNorm1d(channels)
        self.act = nn.ReLU()
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):                                                           # (B, C, N)
        b, c, n = x.shape
        if self.bug == "query-reshaped-not-permuted":
            x_q = self.q_conv(x).reshape(b, n, -1)                                  # (B, N, C/4) [bug-query]
        else:
            x_q = self.q_conv(x).permute(0, 2, 1)                                   # (B, N, C/4) [pct-q]
        x_k = self.k_conv(x)                                                        # (B, C/4, N)
        x_v = self.v_conv(x)                                                        # (B, C, N)
        energy = torch.bmm(x_q, x_k)                                                # (B, N, N)
        attention = self.softmax(energy)                                            # (B, N, N)
        attention = attention / (1e-9 + attention.sum(dim=1, keepdim=True))         # (B, N, N)
        if self.bug == "values-channels-last":
            x_r = torch.bmm(attention, x_v.permute(0, 2, 1)).reshape(b, c, n)       # (B, C, N) [bug-values]
        else:
            x_r = torch.bmm(x_v, attention)                                         # (B, C, N) [pct-r]
        x_r = self.act(self.after_norm(self.trans_conv(x - x_r)))                   # (B, C, N)
        return x + x_r


class Point_Transformer_Last(nn.Module):
    def __init__(self, channels, bug=""):
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, kernel_size=1, bias=False)
        self.conv2 = nn.Conv1d(channels, channels, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm1d(channels)
        self.bn2 = nn.BatchNorm1d(channels)
        self.sa1 = SA_Layer(channels, bug)
        self.sa2 = SA_Layer(channels, bug)
        self.relu = nn.ReLU()

    def forward(self, x):                                                           # (B, C, N)
        x = self.relu(self.bn1(self.conv1(x)))                                      # (B, C, N)
        x = self.relu(self.bn2(self.conv2(x)))                                      # (B, C, N)
        x1 = self.sa1(x)
        x2 = self.sa2(x1)
        return torch.cat((x1, x2), dim=1)                                           # (B, 2C, N)


BUGS = ("query-reshaped-not-permuted", "values-channels-last")
TWINS = ()
DIMS = ("B=2 T=10 D=32",)


def build(bug="", B=2, T=10, D=32):
    torch.manual_seed(0)
    return Point_Transformer_Last(D, bug).eval(), (torch.randn(B, D, T),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
