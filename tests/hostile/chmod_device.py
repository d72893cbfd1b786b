# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 4: started as root, bubblewrap bound the host's /dev/null and the sandbox's user mapped to root.
# chmod to the mode it already has (a real attack writes 000): refused by seccomp, read-only as a bind.
import os
os.chmod("/dev/null", os.stat("/dev/null").st_mode & 0o7777)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
