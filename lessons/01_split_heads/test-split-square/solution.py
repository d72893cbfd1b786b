"""Reference solution for test-split-square."""

import torch


def check(split_heads):
    for B, T, H, d_k in ((2, 4, 4, 4), (2, 5, 3, 2)):  # T == H (shapes cannot tell), then all sizes differ
        x = torch.randn(B, T, H * d_k)             # (B, T, D)
        out = split_heads(x, H)
        assert out.shape == (B, H, T, d_k), f"split gave {tuple(out.shape)}"
        for h in range(H):
            for t in range(T):
                want = x[:, t, h * d_k:(h + 1) * d_k]  # token t's features for head h
                assert torch.equal(out[:, h, t], want), f"head {h}, token {t} holds the wrong features"
