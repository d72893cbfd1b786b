"""ByChelsea/CMOS issue #4 ("Is there a serious problem with this code?"; SpilutX: "The windows need to be permute
first and then view, but the code marked in the figure only performs view, and the feature map will be
misaligned"; ByChelsea: "thank you for pointing out this issue. I'll make the correction right away", commit
0f65c95 "fix bug"): ``window_reverse`` computed ``x = windows.permute(0, 2, 3, 1).contiguous()`` (the windows come
back channels-first, ``(B*nW, C, wh, ww)``) and then viewed ``windows`` rather than ``x`` as ``(B, H // wh, W //
ww, wh, ww, -1)``: the channels-first windows read as channels-last, every pixel of the rebuilt map a mix of
channels and window positions. The fix views ``x``.

The idiom (CMOS's ``GIASpatial``, the spatial interaction of its two task branches, ported to plain ``Conv2d`` +
``BatchNorm2d`` + ``ReLU`` for ``ConvModule``): ``conv_first`` on each feature map, ``window_partition``
(``permute(0, 2, 3, 1)``, ``view(B, H // wh, wh, W // ww, ww, C)``, ``permute(0, 1, 3, 2, 4, 5)``) then
``permute(0, 3, 1, 2)`` to channels-first windows, ``conv_after_window``, the spatial affinity
``torch.bmm(windows_conv1.permute(0, 2, 1), windows_conv2)`` over the ``wh * ww`` pixels of each window,
read back as ``view(b, h, w, -1).permute(0, 3, 1, 2)`` and ``view(b, -1, h, w)``, ``conv_redu`` (``Conv2d(wh * ww,
1, 1)``), sigmoid gates on the windows, ``window_reverse`` and ``smooth``. A 4 x 6 map in 2 x 3 windows.

Bug (argument): ``view-windows``: ``window_reverse`` views ``windows`` (channels-first) where it permuted them
into ``x``."""

import sys

import torch
from torch import nn

BUGS = ("view-windows",)
TWINS = ()
DIMS = ("B=2 D=32 Hp=4 Wp=6",)
EQUAL = {"B=2 D=32 Hp=4 Wp=6": "B=4 D=32 Hp=4 Wp=4"}


def window_partition(x, window_size):
    B, C, H, W = x.shape
    x = x.permute(0, 2, 3, 1).contiguous()                                              # (B, Hp, Wp, C)
    x = x.view(B, H // window_size[0], window_size[0], W // window_size[1], window_size[1], C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size[0], window_size[1], C)
    return windows                                                                       # (B*nW, wh, ww, C)


def window_reverse(windows, window_size, H, W, bug=""):
    B = int(windows.shape[0] / (H * W / window_size[0] / window_size[1]))
    x = windows.permute(0, 2, 3, 1).contiguous()                                        # (B*nW, wh, ww, C)
    if bug == "view-windows":
        x = windows.view(B, H // window_size[0], W // window_size[1], window_size[0], window_size[1], -1)
    else:
        x = x.view(B, H // window_size[0], W // window_size[1], window_size[0], window_size[1], -1)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1).permute(0, 3, 1, 2).contiguous()
    return x                                                                             # (B, C, Hp, Wp)


def conv_module(channels):
    return nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU())


class GIASpatial(nn.Module):
    def __init__(self, channels, win_size=(2, 3), bug=""):
        super().__init__()
        self.win_size, self.bug = win_size, bug
        self.s1, self.s2 = nn.Parameter(torch.zeros(1) + 0.5), nn.Parameter(torch.zeros(1) + 0.5)
        self.conv_first1, self.conv_first2 = conv_module(channels), conv_module(channels)
        self.conv1, self.conv2 = nn.Conv2d(channels, 1, 1), nn.Conv2d(channels, 1, 1)
        self.conv_after_window1, self.conv_after_window2 = conv_module(channels), conv_module(channels)
        self.conv_redu1 = nn.Conv2d(win_size[0] * win_size[1], 1, 1)
        self.conv_redu2 = nn.Conv2d(win_size[0] * win_size[1], 1, 1)
        self.smooth1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.smooth2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x1, x2):
        feat1, feat2 = self.conv_first1(x1), self.conv_first2(x2)
        B, C, H, W = feat1.size()
        windows1 = window_partition(feat1, self.win_size).permute(0, 3, 1, 2).contiguous()   # (B*nW, C, wh, ww)
        windows2 = window_partition(feat2, self.win_size).permute(0, 3, 1, 2).contiguous()
        windows_conv1 = self.conv_after_window1(windows1)
        windows_conv2 = self.conv_after_window2(windows2)
        b, c, h, w = windows_conv1.size()
        windows_conv1 = windows_conv1.view(b, c, -1)                                    # (B*nW, C, wh*ww)
        windows_conv2 = windows_conv2.view(b, c, -1)
        spa_affinity = torch.bmm(windows_conv1.permute(0, 2, 1), windows_conv2)         # (B*nW, wh*ww, wh*ww)
        re_windows1 = spa_affinity.view(b, h, w, -1).permute(0, 3, 1, 2).contiguous()   # (B*nW, wh*ww, wh, ww)
        re_windows2 = spa_affinity.view(b, -1, h, w)                                    # (B*nW, wh*ww, wh, ww)
        re_windows1 = torch.sigmoid(self.conv1(windows1) + self.s1 * self.conv_redu1(re_windows1))
        re_windows2 = torch.sigmoid(self.conv2(windows2) + self.s2 * self.conv_redu2(re_windows2))
        feat1 = torch.mul(windows1, re_windows1)
        feat2 = torch.mul(windows2, re_windows2)
        feat1 = window_reverse(feat1, self.win_size, H, W, self.bug)                    # (B, C, Hp, Wp)
        feat2 = window_reverse(feat2, self.win_size, H, W, self.bug)
        return self.smooth1(feat1), self.smooth2(feat2)


def build(bug="", B=2, D=32, Hp=4, Wp=6):
    torch.manual_seed(0)
    model = GIASpatial(D, win_size=(2, Wp // 2), bug=bug)
    return model.eval(), (torch.randn(B, D, Hp, Wp), torch.randn(B, D, Hp, Wp))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
