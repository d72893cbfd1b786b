# exercise: split-heads
# verdict: crash
# expect: unable to open database file
import sqlite3
sqlite3.connect("/tmp/shapetrace-hostile.db").execute("create table t (x)")
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
