# exercise: split-heads
# verdict: crash
# expect: Error
import subprocess
subprocess.run(["sh", "-c", "touch /tmp/shapetrace-hostile-exec"], check=True)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
