"""Reference solution for patchify."""

import torch


def patchify(x: torch.Tensor, p: int) -> torch.Tensor:
    B, C, H, W = x.shape                                   # (B, C, H_img, W_img)
    h, w = H // p, W // p                                  # patches per column and per row
    x = x.reshape(B, C, h, p, w, p)                        # (B, C, h, p, w, p)
    x = x.permute(0, 2, 4, 1, 3, 5)                        # (B, h, w, C, p, p)
    return x.reshape(B, h * w, C * p * p)                  # (B, N, C*p*p), copied
