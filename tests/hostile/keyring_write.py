# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 5: one student's check leaves its solution in the kernel's user keyring (add_key(2), keyrings(7)),
# which every process of one user shares whatever its mounts: the next check reads it (keyring_read_classmate.py).
# seccomp refuses add_key, keyctl and request_key; a user namespace of its own also has a keyring of its own.
import ctypes, os
_syscall = ctypes.CDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long
BODY = b"return x.view(B, T, heads, D // heads).transpose(1, 2)"
if _syscall(248, b"user", b"shapetrace-solution", BODY, len(BODY), ctypes.c_long(-4)) < 0:  # add_key, @u
    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err))
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
