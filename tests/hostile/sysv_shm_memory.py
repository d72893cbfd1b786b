# exercise: split-heads
# verdict: crash
# expect: shmget: Operation not permitted
# Round 5 (issue 34): System V shared memory, attached, filled and detached segment by segment, is counted by
# no address-space cap and outlives the check until removed (shmget(2)): 24 segments of 64 MiB are 1.5 GiB
# beside a 512 MiB cap (on main it stored them, 384 MiB a second, then passed). seccomp refuses shmget;
# bubblewrap alone gives each check an IPC namespace that dies with it (tests/exercises/test_sandbox_syscalls.py).
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
for n in range(24):
    seg = libc.shmget(0, 64 << 20, 0o1600)  # IPC_PRIVATE | IPC_CREAT
    if seg < 0:
        raise OSError(ctypes.get_errno(), f"shmget: {os.strerror(ctypes.get_errno())}")
    at = libc.shmat(seg, None, 0)
    ctypes.memset(at, 1, 64 << 20)
    libc.shmdt(at)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
