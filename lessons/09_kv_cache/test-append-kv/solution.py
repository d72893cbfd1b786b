"""Reference solution for test-append-kv."""

import torch


def check(append_kv):
    B, H_kv, T, d_k = 2, 3, 4, 5                   # H_kv >= 2 and T >= 2: the wrong axis shows
    cache = torch.randn(B, H_kv, T, d_k)           # (B, H_kv, T, d_k)
    step = torch.randn(B, H_kv, 1, d_k)            # (B, H_kv, 1, d_k)
    out = append_kv(cache, step)
    assert out.shape == (B, H_kv, T + 1, d_k), f"the cache is {tuple(out.shape)}"
    assert torch.equal(out[:, :, :T], cache), "the old steps moved or changed"
    assert torch.equal(out[:, :, T:], step), "the last step is not the new one"
