# exercise: test-split-square
# verdict: rejects-reference
# expect: fails the reference
# Fails every call but the first: once passed 1 time in 5 (when the reference came first).
CALLS = []
def check(split_heads):
    CALLS.append(1)
    assert len(CALLS) == 1, "only the first call passes"
