# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 5: two students graded at once share every file of the standard library: one holds a lock on os.py
# for each 1 bit of a solution, the other probes it (flock(2) works on a file opened read-only, across mount
# and user namespaces). This half probes, and would rebuild the solution from the bits it saw. seccomp
# refuses flock and fcntl's locks; no other layer sees them.
import fcntl, os
f = open(os.__file__, "rb")
try:
    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
except BlockingIOError:
    pass
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
