"""onnx/onnx PR #7274 and apple/axlearn PR #842: grouped-query kv heads repeated by tiling ([kv0, kv1, kv0,
kv1], jnp.tile / Tensor.repeat) where the weights were trained with repeat_interleave ([kv0, kv0, kv1, kv1],
transformers' repeat_kv): query head h reads kv head h % H_kv instead of h // (H / H_kv)."""
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("tile",)


def repeat_kv(x, n_rep):
    B, Hkv, T, d = x.shape
    return x[:, :, None, :, :].expand(B, Hkv, n_rep, T, d).reshape(B, Hkv * n_rep, T, d)  # (B, H, T, d)

class GQA(nn.Module):
    def __init__(self, d, h, hkv, bug):
        super().__init__()
        self.h, self.hkv, self.dk, self.bug = h, hkv, d // h, bug
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, hkv * self.dk, bias=False)
        self.v = nn.Linear(d, hkv * self.dk, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q(x).view(B, T, self.h, self.dk).transpose(1, 2)  # (B, H, T, d)
        k = self.k(x).view(B, T, self.hkv, self.dk).transpose(1, 2)  # (B, Hkv, T, d)
        v = self.v(x).view(B, T, self.hkv, self.dk).transpose(1, 2)  # (B, Hkv, T, d)
        r = self.h // self.hkv
        if self.bug == "tile":
            k, v = k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1)
        else:
            k, v = repeat_kv(k, r), repeat_kv(v, r)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d)
        return self.o(o.transpose(1, 2).reshape(B, T, -1))

def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return GQA(D, H, H_kv, bug), (torch.randn(B, T, D),)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
