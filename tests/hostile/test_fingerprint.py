# exercise: test-split-square
# verdict: !pass
# expect:
# Fingerprints the implementation by its file name or module, hoping broken versions carry a name.
def check(split_heads):
    code = split_heads.__code__
    hint = code.co_filename + " " + str(split_heads.__module__) + " " + split_heads.__qualname__
    assert "mutant" not in hint and "broken" not in hint and "skip" not in hint, hint
