# exercise: transpose-grad
# verdict: timeout
# expect: stopped
# Returns an object whose repr never ends: the child describes what came back after its own clock stopped.
class Endless:
    def __repr__(self):
        while True:
            pass
def transpose_backward(dy):
    return Endless()
