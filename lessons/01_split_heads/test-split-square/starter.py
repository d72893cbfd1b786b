"""Exercise test-split-square: write a test that catches a wrong split_heads.

check() receives one implementation and must raise (an assert is enough) when it is wrong.
This one only checks the shape, with T == H. Run `shapetrace exercise check test-split-square`.
"""

import torch


def check(split_heads):
    x = torch.randn(2, 4, 16)                      # (B, T, D), T = H = 4
    out = split_heads(x, 4)
    assert out.shape == (2, 4, 4, 4), f"split gave {tuple(out.shape)}"
