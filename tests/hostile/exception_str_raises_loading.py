# exercise: split-heads
# verdict: crash
# expect: your file raised BrokenError (its message could not be shown: __str__ raised ValueError)
# rollbar/pyrollbar issue #148's BrokenError (its __str__ raises ValueError), raised while the file loads:
# the loading's report reads its type and why its message is missing, with the learner's line.
class BrokenError(Exception):
    def __str__(self):
        raise ValueError("I'm dumb")
raise BrokenError()
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
