"""Reference solution for test-apply-rope."""

import torch


def check(apply_rope):
    B, H, T, d_k = 2, 3, 5, 8                      # T != H, d_k >= 4, positions 1..5: every mix-up shows
    half = d_k // 2
    inv_freq = 10000.0 ** (-torch.arange(0, d_k, 2) / d_k)  # (d_k/2,)
    angles = torch.arange(1, T + 1)[:, None] * inv_freq      # (T, d_k/2): no angle is 0
    table = torch.cat([angles, angles], dim=-1)    # (T, d_k): rotate_half's layout
    x = torch.randn(B, H, T, d_k)                  # (B, H, T, d_k)
    out = apply_rope(x, table.cos(), table.sin())
    assert out.shape == (B, H, T, d_k), f"apply_rope gave {tuple(out.shape)}"
    c, s = angles.cos(), angles.sin()              # (T, d_k/2): lined up with x's tokens
    x1, x2 = x[..., :half], x[..., half:]          # (B, H, T, d_k/2) each: pair i is (i, i + d_k/2)
    assert torch.allclose(out[..., :half], x1 * c - x2 * s, atol=1e-5), "the first of each pair turned wrongly"
    assert torch.allclose(out[..., half:], x1 * s + x2 * c, atol=1e-5), "the second of each pair turned wrongly"
