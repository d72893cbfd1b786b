# exercise: transpose-grad
# verdict: mutated-input
# expect: changed its input
# transpose_() turns dy itself into the grad: the right values, a view, and the input changed in place.
def transpose_backward(dy):
    return dy.transpose_(1, 2)
