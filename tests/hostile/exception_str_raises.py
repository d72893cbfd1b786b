# exercise: split-heads
# verdict: crash
# expect: your function raised Lies (its message could not be shown: __str__ raised Lies)
# Round 5 (issue 34): an exception whose __str__ raises it again: reading its message in the child fails
# while the verdict is packed. It must read as the learner's exception, with its type and their line (it
# read "your code ended the checker's process (exit code 1)").
class Lies(Exception):
    def __str__(self):
        raise Lies()
def split_heads(x, heads):
    raise Lies()
