"""Exercise rope-complex-pairs: x [B, H, T, d_k], angles [T, d_k/2] -> x rotated, [B, H, T, d_k]."""

import torch


def rope_complex(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    z = torch.complex(x[..., :half], x[..., half:])        # (B, H, T, d_k/2) complex: one pair each
    turn = torch.polar(torch.ones_like(angles), angles)    # (T, d_k/2) complex: e^(i·angle)
    out = z * turn                                         # (B, H, T, d_k/2)
    return torch.cat([out.real, out.imag], dim=-1)         # (B, H, T, d_k)
