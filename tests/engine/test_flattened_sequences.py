"""shapetrace/engine/rules/flattened_sequences.py: each sequence flattened into one vector (``T·D``, beside the
batch alone) for a fixed-length head is a readout, not a merge of heads.

IBM/TabFormer's row projection (tests/corpus/reports5/tabformer_seq_first.py) and PatchTST's ``FlattenHead``:
on c9f984a the flatten was a ``tokens-merged-with-features`` error (the linear reading it "mixes tokens"),
a false ``✗`` on correct code, and with that warning gone the linear was ``projection-over-tokens``. Heads
merged with tokens keep their findings."""

from __future__ import annotations

import torch
from torch import nn

import shapetrace


def _traced(fn, shape, names):
    x = torch.randn(*shape)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, names)
        fn(x)
    return t


def test_a_whole_sequence_flattened_for_a_linear_head_is_no_finding():
    """Fails on c9f984a: ('error', 'tokens-merged-with-features')."""
    torch.manual_seed(0)
    head = nn.Linear(6 * 32, 10)
    t = _traced(lambda x: head(x.flatten(start_dim=-2)), (2, 6, 32), "B T D")
    assert [(e.op, e.outputs[0].dims) for e in t.events] == [("flatten", ("B", "T*D")), ("linear", ("B", None))]
    assert [(d.severity, d.kind) for d in t.diagnostics] == []


def test_tokens_merged_with_head_features_beside_the_heads_keep_their_error():
    """``[B, H, T, d_k].reshape(B, H, T·d_k)`` then a linear: heads merged the wrong way, as before."""
    torch.manual_seed(0)
    proj = nn.Linear(6 * 8, 32)
    t = _traced(lambda x: proj(x.reshape(2, 4, 6 * 8)), (2, 4, 6, 8), "B H T d_k")
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity == "error"] == [
        ("error", "tokens-merged-with-features")]

