"""Exercise patchify: an image [B, C, h*p, w*p] -> patch tokens [B, N, C*p*p]."""

import torch


def patchify(x: torch.Tensor, p: int) -> torch.Tensor:
    B, C, H, W = x.shape                                   # (B, C, H_img, W_img)
    h, w = H // p, W // p                                  # patches per column and per row
    return x.reshape(B, h * w, C * p * p)                  # (B, N, C*p*p)?
