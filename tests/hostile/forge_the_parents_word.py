# exercise: split-heads
# verdict: wrong-values
# expect: distinct
# After each case the checker's parent writes one byte on the child's request pipe: the next case, or stop.
# This answer is wrong, so it puts its own pipe, full of "next case", in place of every pipe it can read,
# hoping the child runs on and the later cases vote it through. The parent decides on the first wrong case
# whatever the child does next (shapetrace/exercises/checker.py, _Answers): wrong values on case 1.
import fcntl
import os
import stat

import torch

_done = []


def _forge():
    for fd in range(3, 256):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISFIFO(st.st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            r, w = os.pipe()
            os.write(w, b"n" * 64)
            os.dup2(r, fd)
    _done.append(1)


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    if not _done:
        _forge()
    B, T, D = x.shape                              # (B, T, D)
    return x.reshape(B, heads, T, D // heads)      # (B, H, T, d_k): the tokens cut across heads
