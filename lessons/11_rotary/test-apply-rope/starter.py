"""Exercise test-apply-rope: write a test that catches a wrong apply_rope.

check() receives one implementation and must raise (an assert is enough) when it is wrong.
This one rotates one token at position 0. Run `shapetrace exercise check test-apply-rope`.
"""

import torch


def check(apply_rope):
    x = torch.randn(2, 3, 1, 4)                    # (B, H, T, d_k): one token
    cos, sin = torch.ones(1, 4), torch.zeros(1, 4)  # (T, d_k): position 0, angle 0
    out = apply_rope(x, cos, sin)
    assert out.shape == x.shape, f"apply_rope gave {tuple(out.shape)}"
    assert torch.allclose(out, x), "position 0 should not turn anything"
