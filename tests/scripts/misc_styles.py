"""Assorted head-splitting idioms on tensors named only by --dims (used by tests/engine/test_thirdparty.py)."""

import torch
import torch.nn.functional as F
from einops import rearrange

B, T, H, d, H_kv = 3, 6, 8, 64, 2
D = H * d
x = torch.randn(B, T, D)                                                          # (B, T, D)
qkv = torch.randn(B, T, 3 * D)                                                    # (B, T, 3*D)
a = qkv.view(B, T, 3, H, d)                                                       # (B, T, qkv, H, d_k)
q0 = a[:, :, 0].transpose(1, 2)                                                   # (B, H, T, d_k)
r = rearrange(qkv, "b t (three h d) -> three b h t d", three=3, h=H)              # (qkv, B, H, T, d_k)
s = torch.einsum("bthd,bshd->bhts", a[:, :, 0], a[:, :, 1])                       # (B, H, T, T)
kv = torch.randn(B, T, H_kv * d).view(B, T, H_kv, d).transpose(1, 2)             # (B, H_kv, T, d_k)
k = kv.repeat_interleave(H // H_kv, dim=1)                                        # (B, H, T, d_k)
u = x.unflatten(-1, (H, d)).transpose(1, 2)                                       # (B, H, T, d_k)
m = u.transpose(1, 2).flatten(2)                                                  # (B, T, D)
bias = torch.tril(torch.ones(T, T)).view(1, 1, T, T)                              # (1, 1, T, T)
att = (u @ k.transpose(-2, -1)).masked_fill(bias[:, :, :T, :T] == 0, float("-inf"))  # (B, H, T, T)
att = F.softmax(att, dim=-1)                                                      # (B, H, T, T)
