# exercise: test-split-square
# verdict: !pass
# expect: your test fails the reference implementation
# Replaces Tensor.transpose and Tensor.reshape with spies that read their caller's frame (the real
# function), then compares that code with the public reference.
# Stopped by: the implementation's own process (shapetrace/exercises/remote.py): the spies patch torch in
# the test's process only; the real code runs elsewhere, so they see nothing of it and the comparison fails
# the reference like every mutant.
import sys

import torch

REF = "def split_heads(x, heads):\n    B, T, D = x.shape\n    return x.view(B, T, heads, D // heads).transpose(1, 2)\n"
SEEN = []
_view = torch.Tensor.view


def _spy(self, *shape):
    SEEN.append(sys._getframe(1).f_code)
    return _view(self, *shape)


torch.Tensor.view = _spy


def check(split_heads):
    split_heads(torch.zeros(2, 4, 12), 3)
    ns = {}
    exec(REF, ns)
    assert SEEN and SEEN[-1].co_code == ns["split_heads"].__code__.co_code, "a mutant"
