"""Exercise add-cls-token: tokens [B, N, D], cls [1, 1, D] -> [B, 1+N, D]."""

import torch


def add_cls_token(tokens: torch.Tensor, cls: torch.Tensor) -> torch.Tensor:
    return torch.cat([cls, tokens], dim=1)                 # (B, 1+N, D)?
