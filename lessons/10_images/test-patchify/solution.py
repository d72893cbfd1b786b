"""Reference solution for test-patchify."""

import torch


def check(patchify):
    B, C, h, w, p = 2, 3, 2, 4, 3                  # C, p >= 2 and h != w, both >= 2: every mix-up shows
    x = torch.randn(B, C, h * p, w * p)            # (B, C, H_img, W_img)
    out = patchify(x, p)
    assert out.shape == (B, h * w, C * p * p), f"patchify gave {tuple(out.shape)}"
    for i in range(h):
        for j in range(w):
            square = x[:, :, i * p:(i + 1) * p, j * p:(j + 1) * p]  # (B, C, p, p)
            want = square.reshape(B, C * p * p)    # (B, C*p*p)
            assert torch.equal(out[:, i * w + j], want), f"token {i * w + j} is not the square at ({i}, {j})"
