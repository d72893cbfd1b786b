# exercise: split-heads
# verdict: crash
# expect: your function raised HeadError (its message could not be shown: __str__ raised TypeError)
# An exception whose __str__ returns a set (str() then raises TypeError), as in fediverse-devnet/feditest
# PR #168's review ("__str__ returned non-string (type set)"): the learner's exception, never the process's.
class HeadError(ValueError):
    def __init__(self, msg):
        self._msg = msg
    def __str__(self):
        return {self._msg} or self.__class__.__name__
def split_heads(x, heads):
    B, T, D = x.shape
    if D % heads:
        raise HeadError("D must divide by heads")
    raise HeadError(f"{D} features, {heads} heads")
