"""Exercise heads-to-batch: [B, H, T, d_k] -> [B*H, T, d_k], without copying."""

import torch


def heads_to_batch(y: torch.Tensor) -> torch.Tensor:
    B, H, T, d_k = y.shape                         # (B, H, T, d_k)
    pieces = [y[b] for b in range(B)]              # B x (H, T, d_k)
    return torch.cat(pieces, dim=0)                # (B*H, T, d_k)
