"""tier4/autoware-ml pull request #93 ("fix(ptv3): pad last attention window by wrapping, not by repeating"):
Point Transformer V3's serialized attention cuts the serialized points into windows of ``patch_size``; when the
point count is not a multiple of it, the last window is short. Training fills its free slots by borrowing the
tail of the preceding window (a full-size sliding window over the last ``patch_size`` points, every slot a real
point); the export path filled them with ``clamp(arange(padded_n), max=n-1)``, repeats of the last serialized
point, unmasked in the softmax, so every query of that window saw one key many times over and it dominated the
attention. The fix pads by wrapping, as training does.

The idiom (Pointcept's ``SerializedAttention``): ``get_padding_and_inverse`` (the padded index ``pad`` and the
index ``unpad`` of the real points in the padded order), ``order = serialized_order[pad]``, ``inverse =
unpad[serialized_inverse]``, ``qkv = self.qkv(feat)[order]``, ``reshape(-1, K, 3, H, C // H).permute(2, 0, 3, 1,
4).unbind(0)``, ``(q * scale) @ k.transpose(-2, -1)``, ``softmax``, ``(attn @ v).transpose(1, 2).reshape(-1,
C)``, ``feat[inverse]``, ``proj``. One point cloud of T points (features ``(T, C)``) and its serialization order,
windows of 4.

Bug (argument): ``last-window-repeated``: the padded index ``clamp(arange(padded_n), max=n - 1)``."""

import sys

import torch
from torch import nn

BUGS = ("last-window-repeated",)
TWINS = ()
DIMS = ("T=10 D=32 H=4",)


class SerializedAttention(nn.Module):
    def __init__(self, channels, num_heads, patch_size=4, bug=""):
        super().__init__()
        self.channels, self.num_heads, self.patch_size, self.bug = channels, num_heads, patch_size, bug
        self.scale = (channels // num_heads) ** -0.5
        self.qkv = nn.Linear(channels, channels * 3)
        self.proj = nn.Linear(channels, channels)
        self.softmax = nn.Softmax(dim=-1)

    def get_padding_and_inverse(self, n):
        k = self.patch_size
        n_pad = (n + k - 1) // k * k if n > k else n
        unpad = torch.arange(n)
        if self.bug == "last-window-repeated":
            pad = torch.clamp(torch.arange(n_pad), max=n - 1)                                   # [pad]
        else:
            pad = torch.arange(n_pad)
            if n != n_pad:
                pad[n_pad - k + n % k:n_pad] = pad[n_pad - 2 * k + n % k:n_pad - k]              # [pad]
        return pad, unpad

    def forward(self, feat, serialized_order, serialized_inverse):                              # (T, C), (T,), (T,)
        h, k, c = self.num_heads, self.patch_size, self.channels
        pad, unpad = self.get_padding_and_inverse(feat.shape[0])
        order = serialized_order[pad]
        inverse = unpad[serialized_inverse]
        qkv = self.qkv(feat)[order]                                                              # (T_pad, 3C)
        q, k_, v = qkv.reshape(-1, k, 3, h, c // h).permute(2, 0, 3, 1, 4).unbind(dim=0)      # (nW, H, K, d)
        attn = (q * self.scale) @ k_.transpose(-2, -1)
        attn = self.softmax(attn)
        feat = (attn @ v).transpose(1, 2).reshape(-1, c)
        feat = feat[inverse]
        return self.proj(feat)


def build(bug="", T=10, D=32, H=4):
    torch.manual_seed(0)
    code = torch.randperm(T * 7)[:T]                                       # the points' serialization codes
    serialized_order = torch.argsort(code)
    serialized_inverse = torch.argsort(serialized_order)
    return SerializedAttention(D, H, 4, bug).eval(), (torch.randn(T, D), serialized_order, serialized_inverse)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
