# exercise: head-backward
# verdict: !pass
# expect: your function
# Runs the checker's own reference (autograd, from the exercise's content) in the child, if it can read it.
import shapetrace.exercises.content as content
def head_backward(q, k, v, dy):
    return content.load().exercise("head-backward").reference_function()(q, k, v, dy)
