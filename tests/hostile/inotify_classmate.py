# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 5: the same line between two students through inotify(7): one opens os.py for each 1 bit, the other
# watches it (IN_OPEN is reported for every process that opens the file, in any namespace). seccomp refuses
# inotify_init, inotify_init1 and fanotify_init.
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.inotify_init1(0) < 0:
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
