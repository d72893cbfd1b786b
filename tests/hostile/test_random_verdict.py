# exercise: test-split-square
# verdict: !pass
# expect:
# Passes or fails at random: must pass the reference and fail each broken version on every run.
import random
def check(split_heads):
    assert random.random() < 0.5, "coin"
