"""Exercise test-fused-attention: write a test that catches a wrong fused attention call.

check() receives one implementation and must raise (an assert is enough) when it is wrong.
This one checks the output's shape. Run `shapetrace exercise check test-fused-attention`.
"""

import torch


def check(fused_attention):
    q = torch.randn(2, 5, 3, 4)                    # (B, T, H, d_k)
    out = fused_attention(q, q, q)
    assert out.shape == q.shape, f"fused_attention gave {tuple(out.shape)}"
