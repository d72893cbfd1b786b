"""Reference solution for transpose-grad."""

import torch


def transpose_backward(dy):
    return dy.transpose(1, 2)                              # (B, T, H, d_k): a view
