# exercise: test-split-square
# verdict: rejects-reference
# expect: AssertionError
# A learner-written test that fails every implementation with an assertion message of escape sequences
# (a green "✓ pass" after clearing the screen): the verdict quotes the message, cleaned.
def check(split_heads):
    assert False, "\x1b[2J\x1b[H\x1b[32m✓ pass\x1b[0m \x1b]8;;https://example.invalid\x1b\\ok\x1b]8;;\x1b\\\u202e"
