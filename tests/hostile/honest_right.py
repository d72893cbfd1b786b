# exercise: split-heads
# verdict: pass
# expect: correct on all
# An honest control: the right answer passes in the full sandbox.
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
