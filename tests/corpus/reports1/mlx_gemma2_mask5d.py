"""ml-explore/mlx-lm PR #1903 (Gemma 2): queries reshaped 5-D (B, H_kv, repeats, T, d) for grouped heads, the
mask made (B, 1, T, S): broadcast against the 5-D scores it lines up as (1, B, 1, T, S), so batch entry b's
padding lands on key/value head b; silent when B == H_kv. Fix: mask[:, :, None] -> (B, 1, 1, T, S)."""
import sys

import torch
from torch import nn

BUGS = ("mask-4d",)


class Gemma2Attn(nn.Module):
    def __init__(self, d, h, hkv, bug):
        super().__init__()
        self.h, self.hkv, self.dk, self.bug = h, hkv, d // h, bug
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, hkv * self.dk, bias=False)
        self.v = nn.Linear(d, hkv * self.dk, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x, mask):  # mask: (B, 1, T, T) additive
        B, T, _ = x.shape
        r = self.h // self.hkv
        q = self.q(x).view(B, T, self.h, self.dk).transpose(1, 2)  # (B, H, T, d)
        k = self.k(x).view(B, T, self.hkv, self.dk).transpose(1, 2)  # (B, Hkv, T, d)
        v = self.v(x).view(B, T, self.hkv, self.dk).transpose(1, 2)  # (B, Hkv, T, d)
        q = q.reshape(B, self.hkv, r, T, self.dk)  # (B, Hkv, r, T, d)
        s = q @ k[:, :, None].transpose(-1, -2) * self.dk ** -0.5  # (B, Hkv, r, T, T)
        s = 50.0 * torch.tanh(s / 50.0)
        if self.bug == "mask-4d":
            s = s + mask  # (B, 1, T, T) lines up as (1, B, 1, T, T)
        else:
            s = s + mask[:, :, None]  # (B, 1, 1, T, T)
        w = s.softmax(-1)
        o = (w @ v[:, :, None]).reshape(B, self.h, T, self.dk)  # (B, H, T, d)
        return self.o(o.transpose(1, 2).reshape(B, T, -1))

def causal_padded(B, T):
    m = torch.full((T, T), float("-inf")).triu(1).expand(B, 1, T, T).clone()
    m[0, :, :, :2] = float("-inf")   # sequence 0 left-padded by 2 (its first rows keep their own key below)
    for i in range(2):
        m[0, :, i, i] = 0.0
    return m

def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return Gemma2Attn(D, H, H_kv, bug), (torch.randn(B, T, D), causal_padded(B, T))

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
