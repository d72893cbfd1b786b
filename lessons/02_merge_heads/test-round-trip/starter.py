"""Exercise test-round-trip: write a test that catches a wrong split or merge.

check() receives two implementations and must raise (an assert is enough) when they are wrong.
This one checks that merging undoes splitting. Run `shapetrace exercise check test-round-trip`
to see which broken pairs it lets through, then make it check more.
"""

import torch


def check(split_heads, combine_heads):
    x = torch.randn(2, 5, 12)                      # (B, T, D)
    y = split_heads(x, 3)
    assert torch.equal(combine_heads(y), x), "merging did not undo splitting"
