# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 7 (issue 34): pidfd_open(2) on the process the check was forked from, then pidfd_getfd(2) for each of
# its descriptors: a copy of its pipes and files, taken without a signal or ptrace. seccomp refuses both
# calls, and Landlock's scope (the parent is outside the check's domain) refuses the second; without them,
# a check run as root takes its parent's descriptor 0 (tests/exercises/test_sandbox_syscalls.py).
import ctypes, os
sc = ctypes.CDLL(None, use_errno=True).syscall
sc.restype = ctypes.c_long
pidfd = sc(434, os.getppid(), 0)
if pidfd < 0 or sc(438, pidfd, 0, 0) < 0:
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
