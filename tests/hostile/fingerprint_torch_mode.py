# exercise: test-split-square
# verdict: !pass
# expect: your test fails the reference implementation
# A TorchFunctionMode sees every torch call the implementation makes and reads its caller's frame: the
# code object of the real function, compared with the public reference.
# Stopped by: the implementation's own process (shapetrace/exercises/remote.py): a torch function mode sees
# only the test's process, where the real code never runs.
import sys

import torch
from torch.overrides import TorchFunctionMode

REF = "def split_heads(x, heads):\n    B, T, D = x.shape\n    return x.view(B, T, heads, D // heads).transpose(1, 2)\n"


class Spy(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.codes = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.codes.append(sys._getframe(1).f_code)
        return func(*args, **(kwargs or {}))


def check(split_heads):
    spy = Spy()
    with spy:
        split_heads(torch.zeros(2, 4, 12), 3)
    ns = {}
    exec(REF, ns)
    work = [c for c in spy.codes if "view" in c.co_names]
    assert work and work[0].co_code == ns["split_heads"].__code__.co_code, "a mutant"
