"""Exercise test-repeat-kv: write a test that catches a wrong repeat_kv.

check() receives one implementation and must raise (an assert is enough) when it is wrong.
This one uses a single kv head and checks the shape. Run `shapetrace exercise check test-repeat-kv`.
"""

import torch


def check(repeat_kv):
    kv = torch.randn(2, 1, 5, 4)                   # (B, H_kv, T, d_k)
    out = repeat_kv(kv, 3)
    assert out.shape == (2, 3, 5, 4), f"repeat gave {tuple(out.shape)}"
