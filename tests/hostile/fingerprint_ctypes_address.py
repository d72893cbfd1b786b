# exercise: test-split-square
# verdict: !pass
# expect: your test fails the reference implementation
# Follows the sealed facade back to the real function through raw memory: the facade's `_enter` keeps the
# real functions' addresses in a closure cell, and ctypes.cast turns an address back into the object. Then
# compares its bytecode, constants and names with the reference compiled beforehand the way the checker
# compiles it (normalised: the learner has the package), so every broken version "fails" unchecked.
# Stopped by: the implementation's own process (shapetrace/exercises/remote.py): the facade keeps a pipe,
# not an address; no object and no memory of the test's process holds the real code (before, the salt in
# sealed.py made what raw memory led to look new every time).
import ctypes

REF = ("def split_heads(x, heads):\n    B, T, D = x.shape\n"
       "    return x.view(B, T, heads, D // heads).transpose(1, 2)\n")


def _real(fn):
    enter = fn.__globals__.get("_enter")
    if enter is None:
        return fn  # handed the real function itself (no facade)
    for cell in enter.__closure__ or ():
        value = cell.cell_contents
        if isinstance(value, list) and value and all(type(a) is int for a in value):
            return ctypes.cast(value[0], ctypes.py_object).value
    raise AssertionError("no address behind the facade")


def check(split_heads):
    ns = {}
    exec(compile(REF, "<implementation under test>", "exec"), ns)
    want, got = ns["split_heads"].__code__, _real(split_heads).__code__
    assert (got.co_code, got.co_consts, got.co_names) == (want.co_code, want.co_consts, want.co_names), "a mutant"
