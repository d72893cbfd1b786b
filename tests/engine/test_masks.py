"""shapetrace/engine/rules/masks.py: masks and scales that read wrong on their values.

On af0e286 (main) the correct model below was ``✗``: OpenFold's MSA column attention
(tests/corpus/public17/openfold_msa.py), whose mask bias ``[B, T, 1, 1, S]`` hides every sequence of a padded
residue, was ``mask-hides-every-key`` (read as an inverted padding mask). The control (an inverted padding mask over the
batch) keeps its finding."""

from __future__ import annotations

import torch

import shapetrace


def _findings(t):
    return [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")]


def _column_attention(keep):
    """Scores ``[B, T, H, S, S]`` (attention over the S sequences of each of T residues) plus the bias of
    OpenFold's ``keep`` mask ``[B, S, T]`` transposed to ``[B, T, S]``: ``[B, T, 1, 1, S]``."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 5, 3, 32), torch.randn(2, 5, 3, 32)
    with shapetrace.trace(dims="B=2 S=3 T=5 D=32 H=4") as t:
        shapetrace.name(q, "B T S D")
        shapetrace.name(k, "B T S D")
        shapetrace.name(keep, "B S T")
        mask = (1e9 * (keep.transpose(-1, -2) - 1))[..., :, None, None, :]
        q = q.view(2, 5, 3, 4, 8).transpose(-2, -3)                           # (B, T, H, S, d_k)
        k = k.view(2, 5, 3, 4, 8).transpose(-2, -3)
        scores = q @ k.transpose(-1, -2)                                     # (B, T, H, S, S)
        (scores + mask).softmax(-1)
    return t


def test_a_mask_sliced_by_tokens_hiding_a_padded_residue_is_no_reversed_polarity():
    keep = torch.ones(2, 3, 5)
    keep[-1, :, -1] = 0.0                                                    # the last batch's last residue padded
    t = _column_attention(keep)
    assert _findings(t) == []
    assert t.report().verdict.line[0] in "✓?"


def test_an_inverted_padding_mask_over_the_batch_still_hides_every_key():
    keep = torch.ones(2, 6)
    keep[-1, -2:] = 0.0
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(k, "B H T d_k")
        scores = q @ k.transpose(-1, -2)
        (scores + keep[:, None, None, :] * -1e9).softmax(-1)                   # (mask * min: polarity reversed)
    assert _findings(t) == [("error", "mask-hides-every-key")]
