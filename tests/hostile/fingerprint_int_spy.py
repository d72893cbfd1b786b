# exercise: test-split-square
# verdict: !pass
# expect: your test crashed on the reference implementation
# Hands the implementation an int whose arithmetic runs the learner's code (D // heads calls heads'
# __rfloordiv__), which reads the calling frame: the real function's code, compared with the reference.
# Stopped by: the facade (shapetrace/exercises/sealed.py, Guard.plain): it takes only plain values (tensors
# without attributes, numbers, strings, tuples); anything else is a TypeError before anything is sent.
import sys

import torch

REF = "def split_heads(x, heads):\n    B, T, D = x.shape\n    return x.view(B, T, heads, D // heads).transpose(1, 2)\n"
SEEN = []


class Heads(int):
    def __rfloordiv__(self, other):
        SEEN.append(sys._getframe(1).f_code)
        return int(other) // int(self)


def check(split_heads):
    SEEN.clear()
    split_heads(torch.zeros(2, 4, 12), Heads(3))
    ns = {}
    exec(REF, ns)
    assert SEEN and SEEN[0].co_code == ns["split_heads"].__code__.co_code, "a mutant"
