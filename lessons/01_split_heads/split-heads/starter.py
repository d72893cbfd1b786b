"""Exercise split-heads: [B, T, D] -> [B, H, T, d_k].

This version has the right shape and the wrong contents. Run
`shapetrace exercise check split-heads` to see why, then fix it.
"""

import torch


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    B, T, D = x.shape                              # (B, T, D)
    d_k = D // heads
    return x.view(B, heads, T, d_k)                # (B, H, T, d_k)?
