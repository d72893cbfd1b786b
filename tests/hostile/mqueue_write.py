# exercise: split-heads
# verdict: crash
# expect: mq_open: Operation not permitted
# Round 5 (issue 34): a POSIX message queue (mq_overview(7)) keeps its messages after its writer ends, in the
# IPC namespace rather than in any file: one check leaves its solution there, the next reads it. seccomp
# refuses mq_open; RLIMIT_MSGQUEUE 0 gives it no bytes; bubblewrap's IPC namespace dies with the check.
import ctypes, os
rt = ctypes.CDLL("librt.so.1", use_errno=True)
BODY = b"return x.view(B, T, heads, D // heads).transpose(1, 2)"
q = rt.mq_open(b"/shapetrace-solution", 0o100 | 2, 0o666, None)  # O_CREAT | O_RDWR
if q < 0:
    raise OSError(ctypes.get_errno(), f"mq_open: {os.strerror(ctypes.get_errno())}")
rt.mq_send(q, BODY, len(BODY), 0)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
