# exercise: split-heads
# verdict: wrong-values
# expect: view-straight
# An honest control: the classic mistake gets its named verdict.
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, heads, T, D // heads)
