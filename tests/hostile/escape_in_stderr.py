# exercise: split-heads
# verdict: crash
# expect: exit code 3
# Escape sequences written straight to the child's standard error (the verdict quotes its last lines),
# then the process ends: the quoted lines are cleaned like every other string from the learner.
import os
def split_heads(x, heads):
    os.write(2, "\x1b[2J\x1b[H\x1b[32m✓ pass\x1b[0m\x1b]8;;https://example.invalid\x07link\x1b]8;;\x07\n".encode())
    os._exit(3)
