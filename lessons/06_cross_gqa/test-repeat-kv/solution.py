"""Reference solution for test-repeat-kv."""

import torch


def check(repeat_kv):
    B, H_kv, n_rep, T, d_k = 2, 2, 3, 5, 4         # two kv heads or more: tiling shows
    kv = torch.randn(B, H_kv, T, d_k)              # (B, H_kv, T, d_k)
    out = repeat_kv(kv, n_rep)
    assert out.shape == (B, H_kv * n_rep, T, d_k), f"repeat gave {tuple(out.shape)}"
    for h in range(H_kv * n_rep):
        assert torch.equal(out[:, h], kv[:, h // n_rep]), f"head {h} does not hold kv head {h // n_rep}"
