"""Exercise test-append-kv: write a test that catches a wrong append_kv.

check() receives one implementation and must raise (an assert is enough) when it is wrong.
This one uses one kv head and one cached step, and counts elements. Run
`shapetrace exercise check test-append-kv`.
"""

import torch


def check(append_kv):
    cache = torch.randn(1, 1, 1, 4)                # (B, H_kv, T, d_k): one head, one step
    step = torch.randn(1, 1, 1, 4)                 # (B, H_kv, 1, d_k)
    out = append_kv(cache, step)
    assert out.numel() == cache.numel() + step.numel(), "the cache did not grow by one step"
