# exercise: test-split-square
# verdict: !pass
# expect:
# Walks up the stack for the worker's loop index, hoping index 0 is the reference.
import sys
def check(split_heads):
    f = sys._getframe()
    while f is not None:
        if "i" in f.f_locals and isinstance(f.f_locals["i"], int) and f.f_locals.get("code"):
            assert f.f_locals["i"] == 0, "not the reference"
            return
        f = f.f_back
