# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 7 (issue 34): a signal with no kill(2): the owner of a pipe's read end in O_ASYNC mode gets SIGIO
# (by default, death) when it becomes readable (fcntl(2), F_SETOWN). Aimed at the process the check was
# forked from. Without a PID namespace, Landlock's signal scope and the filter's rule on fcntl, a check ended
# a process outside this way (tests/exercises/test_sandbox_syscalls.py).
import fcntl, os
r, w = os.pipe()
fcntl.fcntl(r, fcntl.F_SETOWN, os.getppid())
fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC)
os.write(w, b"x")
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
