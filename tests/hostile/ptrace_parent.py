# exercise: split-heads
# verdict: crash
# expect: ptrace refused
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, os.getppid(), 0, 0) != 0:  # PTRACE_ATTACH
    raise PermissionError(ctypes.get_errno(), "ptrace refused")
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
