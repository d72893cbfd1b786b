"""Exercise test-patchify: write a test that catches a wrong patchify.

check() receives one implementation and must raise (an assert is enough) when it is wrong.
This one checks the shape on a 2 x 2 grid of patches. Run `shapetrace exercise check test-patchify`.
"""

import torch


def check(patchify):
    x = torch.randn(2, 3, 8, 8)                    # (B, C, H_img, W_img): 2 x 2 patches of 4 x 4
    out = patchify(x, 4)
    assert out.shape == (2, 4, 48), f"patchify gave {tuple(out.shape)}"
