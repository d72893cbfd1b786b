"""Reference solution for test-fused-attention."""

import math

import torch


def check(fused_attention):
    B, T, H, d_k = 2, 5, 3, 4                      # all different and >= 2: every mix-up shows
    q, k, v = (torch.randn(B, T, H, d_k) for _ in range(3))  # (B, T, H, d_k) each
    out = fused_attention(q, k, v)
    assert out.shape == (B, T, H, d_k), f"fused_attention gave {tuple(out.shape)}"
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))       # (B, H, T, d_k) each
    w = torch.softmax(qh @ kh.transpose(-2, -1) / math.sqrt(d_k), dim=-1)  # (B, H, T, T)
    want = (w @ vh).transpose(1, 2)                # (B, T, H, d_k)
    assert torch.allclose(out, want, rtol=1e-4, atol=1e-5), "the fused output differs from the manual one"
