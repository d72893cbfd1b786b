"""shapetrace/engine/lengths_read.py: a padding mask the model builds from lengths it was given is ``?``, never ``✓``,
until its pads are measured unread.

On 5774b39 a ``[B]`` of lengths had no name, so no verdict depended on it; seeding it ``[B]`` alone (an earlier
attempt) turned rosinality/mac-network-pytorch issue #7 (tests/corpus/reports14/mac_control_pads.py, ``no-pad-mask``:
the control attention given no mask) from ``? checked 18 of 21`` into ``✓ checked all 21 ops``, and Qwen2-Audio's
``pool-over-features`` (public31) into ``✓`` too: names alone cannot see those bugs. The note keeps both ``?``, with
the reason, on the API and with the dependency contracts (the padding contract reads a mask given as an argument)."""

from __future__ import annotations

import torch
from torch import nn

import shapetrace
from tests.corpus.helpers import traced_build, verdict_line
from tests.corpus.public31 import qwen2_audio
from tests.corpus.reports14 import mac_control_pads

REASON = "not proven: the pads of a mask the model builds from its lengths were not measured unread"


class Pool(nn.Module):
    """Masked mean pooling of ``x`` ``(B, T, D)`` over the real tokens ``lengths`` ``(B,)`` counts."""

    def forward(self, x, lengths):
        pad = torch.arange(x.shape[1])[None, :] >= lengths[:, None]                 # (B, T) True at pads
        return x.masked_fill(pad[:, :, None], 0.0).sum(1) / lengths[:, None]


def test_a_mask_built_from_lengths_is_unproven_on_the_api_and_with_the_contracts():
    for bug in mac_control_pads.BUGS:
        line = verdict_line(traced_build(mac_control_pads, bug, mac_control_pads.DIMS[0]))
        assert line.startswith(f"? checked 21 of 21 ops that could carry a layout bug; {REASON}; ")
        # (round 48: its ids hold the embedding's padding index and nothing hides a key: a second reason, named)
        assert "not proven: pad tokens entered" in line
    line = verdict_line(traced_build(qwen2_audio, "pool-over-features", qwen2_audio.DIMS[0]))
    assert line.startswith(f"? checked 29 of 29 ops that could carry a layout bug; {REASON}; no errors")
    model, inputs = mac_control_pads.build("no-pad-mask")
    with torch.no_grad(), shapetrace.trace(dims=mac_control_pads.DIMS[0], dependencies=True) as t:
        model(*inputs)
    notes = [d for d in t.diagnostics if d.kind == "lengths-unmeasured"]
    assert [(d.severity, d.message) for d in notes] == [("note", (
        "not measured on the values: whether the padding stays unread. `ge` builds a padding mask from lengths the "
        "model was given, one per batch entry; no name or shape says that every attention hides those pads, and "
        "the padding contract reads a mask given as an argument, not one the model builds from its lengths."))]
    assert t.report().verdict.line.startswith(f"? checked 21 of 21 ops that could carry a layout bug; {REASON};")


def test_lengths_that_build_no_boolean_mask_and_a_mask_given_whole_leave_no_note():
    x, lengths = torch.randn(2, 6, 32), torch.tensor([6, 4])
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        Pool()(x, lengths)
    assert [d.kind for d in t.diagnostics] == ["lengths-unmeasured"]
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:   # (a timestep: floats, no mask)
        nn.Linear(1, 32)(torch.tensor([3.0, 7.0])[:, None])
    assert [d.kind for d in t.diagnostics] == []
    with torch.no_grad(), shapetrace.trace(dims="B=4 T=6 D=32 H=4") as t:   # (B = H: the lengths have no name)
        Pool()(torch.randn(4, 6, 32), torch.tensor([6, 4, 6, 5]))
    assert "lengths-unmeasured" not in [d.kind for d in t.diagnostics]
