# exercise: test-split-square
# verdict: !pass
# expect: your test fails the reference implementation
# Makes the implementation raise (a width the heads do not divide) and walks the traceback into the frame
# that raised: the real function's code, compared with the public reference.
# Stopped by: the implementation's own process (shapetrace/exercises/remote.py): an exception comes back as
# its class name and message, rebuilt in the test's process, with no frame of the real code.
import torch

REF = "def split_heads(x, heads):\n    B, T, D = x.shape\n    return x.view(B, T, heads, D // heads).transpose(1, 2)\n"


def check(split_heads):
    codes = []
    try:
        split_heads(torch.zeros(2, 4, 10), 3)
    except Exception as exc:
        tb = exc.__traceback__
        while tb is not None:
            codes.append(tb.tb_frame.f_code)
            tb = tb.tb_next
    ns = {}
    exec(REF, ns)
    work = [c for c in codes if "view" in c.co_names]
    assert work and work[0].co_code == ns["split_heads"].__code__.co_code, "a mutant"
