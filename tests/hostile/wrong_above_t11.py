# exercise: split-heads
# verdict: wrong-values
# expect: large
def split_heads(x, heads):
    B, T, D = x.shape
    if T > 11:
        return x.view(B, heads, T, D // heads)
    return x.view(B, T, heads, D // heads).transpose(1, 2)
