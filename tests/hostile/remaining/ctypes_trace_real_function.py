# exercise: test-split-square
# verdict: pass
# expect: your test passes the reference and catches all 4 broken versions
# WHAT REMAINS (a measurement, not a pass anyone wants): no salt hides what the real code does. This test
# reaches the real function through raw memory, as fingerprint_ctypes_address.py does (ctypes taken from
# torch, which holds it: refusing `import ctypes` would stop nothing), calls it directly under its own torch
# function mode, and compares the ops it runs (names and plain arguments) with the reference's, run the same
# way: it tells every broken version from the reference without checking a single value.
# Closing this needs the implementation in a process of its own (tests/test_sealed.py measures it here).
import sys

import torch
from torch.overrides import TorchFunctionMode

ctypes = sys.modules["torch"].ctypes
REF = ("def split_heads(x, heads):\n    B, T, D = x.shape\n"
       "    return x.view(B, T, heads, D // heads).transpose(1, 2)\n")


class Ops(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        plain = [a for a in args if isinstance(a, (int, float, str))]
        self.seen.append((getattr(func, "__name__", str(func)), plain))
        return func(*args, **(kwargs or {}))


def _real(fn):
    enter = fn.__globals__.get("_enter")
    if enter is None:
        return fn
    for cell in enter.__closure__ or ():
        value = cell.cell_contents
        if isinstance(value, list) and value and all(type(a) is int for a in value):
            return ctypes.cast(value[0], ctypes.py_object).value
    raise AssertionError("no address behind the facade")


def _ops(fn):
    with Ops() as ops:
        fn(torch.zeros(1, 2, 4), 2)
    return ops.seen


def check(split_heads):
    ns = {}
    exec(REF, ns)
    assert _ops(_real(split_heads)) == _ops(ns["split_heads"]), "a mutant"
