# exercise: split-heads
# verdict: !pass
# expect: before your function returned
# A right answer that also closes every pipe it can read after its first case: the child's copy of the
# request pipe, where the parent's word after each case arrives. The child then hears nothing, stops, and
# the cases it never ran are no pass (the parent waits for every case; a silent child is a dead one).
import fcntl
import os
import stat

import torch

_calls = []


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    _calls.append(1)
    if len(_calls) == 1:
        for fd in range(3, 256):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode) and \
                        fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                    os.close(fd)
            except OSError:
                pass
    B, T, D = x.shape                              # (B, T, D)
    return x.view(B, T, heads, D // heads).transpose(1, 2)   # (B, H, T, d_k)
