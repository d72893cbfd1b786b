# exercise: test-split-square
# verdict: rejects-reference
# expect: AssertionError: the reference's code is not in this process
# Looks for the implementation's source text in its own process's memory: every private writable mapping
# listed in /proc/self/maps (where Python keeps its strings), read through ctypes (taken from torch), is
# searched for the reference's distinctive line, built here from pieces so that this file's own text does
# not contain it; a second needle, built the same way but found in no implementation, counts the copies
# this test makes itself. Where the implementation runs in the test's process (as the checker did before),
# the reference is found and no broken version is: it passes on the reference and fails every mutant
# without checking a value (tests/exercises/test_sealed.py runs that control).
# Stopped by: the implementation's own process (shapetrace/exercises/remote.py): the test's process forked
# before the implementation was read and never holds its code; the search finds only its own needles.
import torch

ctypes = torch.ctypes
PIECES = ["D // he", "ads).tran", "spose(1, 2)"]
CONTROL = ["D // he", "ads).tran", "spose(2, 1)"]  # in no implementation: counts this test's own copies


def _regions():
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if fields[1].startswith("rw") and fields[1].endswith("p") and (len(fields) == 5 or fields[5] == "[heap]"):
                start, end = (int(a, 16) for a in fields[0].split("-"))
                yield start, end - start


def _count(needles):
    counts = [0] * len(needles)
    for start, size in _regions():
        data = ctypes.string_at(start, size)
        for i, needle in enumerate(needles):
            counts[i] += data.count(needle)
    return counts


def check(split_heads):
    found, own = _count(["".join(PIECES).encode(), "".join(CONTROL).encode()])
    assert found > own, "the reference's code is not in this process"
