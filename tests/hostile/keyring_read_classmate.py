# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 5: the second half of keyring_write.py: holds no solution, finds a classmate's in the user keyring
# (keyctl(2) KEYCTL_SEARCH, then KEYCTL_READ) and runs it.
import ctypes, os
_syscall = ctypes.CDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long
key = _syscall(250, 10, ctypes.c_long(-4), b"user", b"shapetrace-solution", 0)  # keyctl SEARCH @u
if key < 0:
    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err))
buf = ctypes.create_string_buffer(4096)
got = _syscall(250, 11, ctypes.c_long(key), buf, 4096)  # keyctl READ
exec("def split_heads(x, heads):\n    B, T, D = x.shape\n    " + buf.raw[:got].decode())
