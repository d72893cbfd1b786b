# exercise: split-heads
# verdict: not-a-tensor
# expect: not a tensor
# The function returns an object of a class whose name is escape sequences (a fake green "✓ pass" over
# a cleared screen); the verdict names the type it returned, cleaned of every control character.
Shown = type("\x1b[2J\x1b[H\x1b[32m✓ pass\x1b[0m\u2066", (), {"__repr__": lambda self: "\x1b[2J\x1b[32m✓ pass\x1b[0m"})
def split_heads(x, heads):
    return Shown()
