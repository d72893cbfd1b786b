# exercise: head-dim
# verdict: wrong-values
# expect: smaller
def head_dim(d_model, heads):
    if d_model < heads:
        return 0
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    return d_model // heads
