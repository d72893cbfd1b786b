"""Reference solution for rope-complex-pairs."""

import torch


def rope_complex(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    B, H, T, d_k = x.shape                                 # (B, H, T, d_k)
    pairs = x.contiguous().view(B, H, T, d_k // 2, 2)      # (B, H, T, d_k/2, 2): neighbours (2i, 2i+1)
    z = torch.view_as_complex(pairs)                       # (B, H, T, d_k/2) complex, a view
    turn = torch.polar(torch.ones_like(angles), angles)    # (T, d_k/2) complex: e^(i·angle)
    out = torch.view_as_real(z * turn)                     # (B, H, T, d_k/2, 2)
    return out.flatten(-2)                                 # (B, H, T, d_k): each pair back in place
