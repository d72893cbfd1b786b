# exercise: test-split-square
# verdict: misses-mutants
# expect: your test misses 3 of the 4 broken versions: skip-transpose, reshape-not-transpose, interleaved-heads
# An honest control for a test-writing exercise: a test that checks only the output's shape, at sizes that
# all differ, catches the one broken version whose shape is wrong and misses the three whose shape is right.
import torch


def check(split_heads):
    x = torch.randn(2, 5, 6)  # (B, T, D)
    assert split_heads(x, 3).shape == (2, 3, 5, 2)  # (B, H, T, d_k)
