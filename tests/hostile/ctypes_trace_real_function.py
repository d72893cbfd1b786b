# exercise: test-split-square
# verdict: rejects-reference
# expect: AssertionError: no address behind the facade
# Reaches for the real function through raw memory, as fingerprint_ctypes_address.py does (ctypes taken from
# torch, which holds it: refusing `import ctypes` would stop nothing), to call it directly under its own
# torch function mode and compare the ops it runs (names and plain arguments) with the reference's, run the
# same way: where the real function is in the test's process it tells every broken version from the
# reference without checking a single value (it passed, in the full sandbox, while the implementation was
# sealed and salted in the same process).
# Stopped by: the implementation's own process (shapetrace/exercises/remote.py): the facade holds a pipe,
# not an address; the real function is in no object, no memory of the test's process.
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
