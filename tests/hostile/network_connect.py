# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
import socket
socket.create_connection(("127.0.0.1", 22), timeout=1)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
