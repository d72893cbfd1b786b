# exercise: split-heads
# verdict: pass
# expect: correct on all
# Round 5 (issue 34): a right answer that leaves a thread running, not a daemon, writing to standard error for
# ever: the check must still end at once with its verdict (the child leaves with os._exit, which takes every
# thread; standard error keeps its last 4,000 bytes), never hang until the deadline. Its twin: a pass.
import os, threading
def _flood():
    while True:
        os.write(2, b"x" * 4096)
threading.Thread(target=_flood).start()
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
