# exercise: split-heads
# verdict: crash
# expect: Resource temporarily unavailable
import os
if os.fork() == 0:
    import time
    time.sleep(31.4159)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
