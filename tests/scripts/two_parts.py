"""Ops in the script itself and in an imported library module (used by tests/app/test_runner.py)."""

import sys

import torch
from mylib.blocks import Block


def prepare(x):
    return x.transpose(0, 1).contiguous().transpose(0, 1)              # (B, T, D)


x = prepare(torch.randn(2, 6, 512))                                    # (B, T, D)
y = Block(8)(x)                                                        # (B, T, D)
print("argv", sys.argv[1:], "shape", tuple(y.shape))
