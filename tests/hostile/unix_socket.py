# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
import socket
s = socket.socket(socket.AF_UNIX)
s.bind("/tmp/shapetrace-hostile.sock")
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
