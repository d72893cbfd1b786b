"""Reference solution for test-round-trip."""

import torch


def check(split_heads, combine_heads):
    B, T, H, d_k = 2, 5, 3, 4                      # T != H, and no size repeats
    x = torch.randn(B, T, H * d_k)                 # (B, T, D)
    y = split_heads(x, H)
    assert y.shape == (B, H, T, d_k), f"split gave {tuple(y.shape)}"
    for h in range(H):
        for t in range(T):
            want = x[:, t, h * d_k:(h + 1) * d_k]  # token t's features for head h
            assert torch.equal(y[:, h, t], want), f"head {h}, token {t} holds the wrong features"
    z = torch.randn(B, H, T, d_k)                  # (B, H, T, d_k)
    merged = combine_heads(z)
    assert merged.shape == (B, T, H * d_k), f"merge gave {tuple(merged.shape)}"
    for h in range(H):
        assert torch.equal(merged[:, :, h * d_k:(h + 1) * d_k], z[:, h]), f"head {h} merged to the wrong place"
    assert torch.equal(combine_heads(split_heads(x, H)), x), "merging did not undo splitting"
