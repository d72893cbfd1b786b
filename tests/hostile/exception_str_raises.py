# exercise: split-heads
# verdict: crash
# expect: ended the checker's process
# Round 5 (issue 34): an exception whose __str__ raises it again: reading its message in the child fails
# while the verdict is packed. It must be the learner's crash, never an internal error of the parent.
class Lies(Exception):
    def __str__(self):
        raise Lies()
def split_heads(x, heads):
    raise Lies()
