# exercise: test-split-square
# verdict: !pass
# expect: your test fails the reference implementation
# Catches the real code while it runs: a profile hook records the code object of every Python call made
# inside split_heads, and the test compares the one that does the work with the public reference.
# Stopped by: the implementation's own process (shapetrace/exercises/remote.py): a hook sees only the
# test's process, where the real code never runs.
import sys

import torch

REF = "def split_heads(x, heads):\n    B, T, D = x.shape\n    return x.view(B, T, heads, D // heads).transpose(1, 2)\n"


def check(split_heads):
    seen = []
    sys.setprofile(lambda frame, event, arg: seen.append(frame.f_code) if event == "call" else None)
    try:
        split_heads(torch.zeros(2, 4, 12), 3)
    finally:
        sys.setprofile(None)
    ns = {}
    exec(REF, ns)
    work = [c for c in seen if "view" in c.co_names]
    assert work and work[0].co_code == ns["split_heads"].__code__.co_code, "a mutant"
