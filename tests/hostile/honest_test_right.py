# exercise: test-split-square
# verdict: pass
# expect: your test passes the reference and catches all 4 broken versions
# An honest control for a test-writing exercise: a test that checks where each token's features land, at
# T == H and at sizes that all differ, passes with the implementation in its own process (each call a
# round trip over the pipes: views, strides and values as the real function's).
import torch


def check(split_heads):
    for B, T, H, d_k in ((2, 4, 4, 4), (2, 5, 3, 2)):
        x = torch.randn(B, T, H * d_k)  # (B, T, D)
        out = split_heads(x, H)  # (B, H, T, d_k)
        assert out.shape == (B, H, T, d_k)
        assert out.data_ptr() == x.data_ptr(), "a split moves no data: it is a view"
        for h in range(H):
            assert torch.equal(out[:, h], x[:, :, h * d_k:(h + 1) * d_k]), f"head {h} holds the wrong features"
