# exercise: heads-to-batch
# verdict: mutated-input
# expect: changed its input
# A copy dressed as a view: the input is pointed at new memory with set_, so output and input share it.
def heads_to_batch(x):
    B, H, T, d_k = x.shape
    copy = x.clone()
    x.set_(copy.untyped_storage(), x.storage_offset(), x.shape, x.stride())
    return x.reshape(B * H, T, d_k)
