# exercise: repeat-kv
# verdict: layout
# expect: ran out of memory
# Copies, except at the one input size the memory probe used to use.
def repeat_kv(kv, n_rep):
    B, H, T, d = kv.shape
    if (B, H, T, d) == (1, 2, 1024, 2048):
        kv = kv.clone()
    return kv.clone()[:, :, None].expand(B, H, n_rep, T, d).reshape(B, H * n_rep, T, d)
