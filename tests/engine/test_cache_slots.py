"""rules/cache_slots: a cache read back past a slot this run skipped, and the reads that are not that.

Both tests trace basic-index writes and slice reads of one buffer; both fail on efc283b (main before round
26: each read beside the writes was reported ``cache-slot-skipped``, a false ``✗`` on Pix2Struct's patches)."""

from __future__ import annotations

import torch

import shapetrace


def error_events(t) -> list[tuple[str, int]]:
    return [(d.kind, d.event) for d in t.diagnostics if d.severity == "error"]


def test_a_read_beside_the_written_slots_is_no_finding():
    """Pix2Struct's flattened patches: the row and column ids written into features 0 and 1, the patch read
    from feature 2 on. The read takes none of the slots written along that axis: fields of one record, not a
    cache's steps (on efc283b: ``cache-slot-skipped`` at the read, #2)."""
    patches = torch.randn(2, 6, 14)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6") as t:
        patches[:, :, 0] = torch.arange(6.0)                              # #0 row ids
        patches[:, :, 1] = torch.arange(6.0)                              # #1 column ids
        patches[:, :, 2:]                                                 # #2 the patch: features 2-13
    assert [e.op for e in t.events] == ["__setitem__", "__setitem__", "__getitem__"]
    assert error_events(t) == []


def test_a_read_that_takes_a_written_slot_and_skips_the_next_is_still_found():
    """The finding keeps its case: a step written at slot 6 and at slot 8, read ``[:, 6:9]``: slot 6 is read
    back, slot 7 was skipped after it (the read starts past 0, so the prefix-only reading of the rule is not
    what decides)."""
    cache = torch.zeros(2, 16, 4, 8)
    step = torch.randn(2, 1, 4, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 d_k=8") as t:
        cache[:, 6:7] = step                                              # #0 slot 6
        cache[:, 8:9] = step                                              # #1 slot 8: 7 skipped
        cache[:, 6:9]                                                     # #2 reads 6, 7, 8
        cache[:, 9:12]                                                    # #3 beside every write: silent
    assert error_events(t) == [("cache-slot-skipped", 2)]
    message = next(d.message for d in t.diagnostics if d.severity == "error")
    assert message.startswith("__getitem__ #2 reads the buffer [2, 16, 4, 8] up to slot 7 along axis 1 (axis 1), "
                              "but no write of this run reached slot 7, while slot 6 was written (the last write, "
                              "__setitem__ #1, filled slots 8:9 along it)")
