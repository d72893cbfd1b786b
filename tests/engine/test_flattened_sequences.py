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



def _mixed(dims, shape, width):
    """MLP-Mixer's token mixing: ``[B, T, D]`` transposed to ``[B, D, T]`` and a ``Linear(T, width)``."""
    torch.manual_seed(0)
    mix = nn.Linear(shape[1], width)
    x = torch.randn(*shape)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        mix(x.transpose(1, 2))
    return t


def test_a_linear_over_one_whole_token_axis_beside_the_features_is_no_finding():
    """Fails on a8dba97 (``('error', 'projection-over-tokens')``): token mixing made as wide as the sequence
    (MLP-Mixer; iTransformer's ``Linear(seq_len, d_model)`` over ``x.permute(0, 2, 1)``, tests/corpus/public18/
    itransformer_variates.py, whose correct file was ✗ at ``B=2 T=12 N=6 D=32 H=4``)."""
    t = _mixed("B=2 T=6 D=32 H=4", (2, 6, 32), 16)
    assert [(e.op, e.inputs[0].dims) for e in t.events] == [("transpose", ("B", "T", "D")), ("linear", ("B", "D", "T"))]
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == []


def test_a_linear_over_tokens_as_long_as_the_features_keeps_its_error():
    """At T = D a ``Linear(D, ...)`` fed the tokens by a transpose too many reads the same shape: the finding
    stays (equal sizes decide nothing)."""
    t = _mixed("B=2 T=32 D=32 H=4", (2, 32, 32), 16)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["projection-over-tokens"]


def test_tokens_left_beside_the_batch_alone_keep_their_error():
    """gaasher/I-JEPA issue #15's slip: each token's features pooled away, then a ``Linear(T, ...)`` over the
    ``[B, T]`` left: no axis kept apart beside the tokens, so the finding stays."""
    torch.manual_seed(0)
    head = nn.Linear(6, 10)
    t = _traced(lambda x: head(x.mean(dim=-1)), (2, 6, 32), "B T D")
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["projection-over-tokens"]


class _Patched(nn.Module):
    """PatchTST's stem and head (tests/corpus/public23/patchtst.py, without the attention): ``[B, T, V]`` ->
    ``[B, V, T/4, T%4]`` by ``unfold``, ``W_P = Linear(4, 32)`` over each patch's steps, then
    ``[B, V, D, T/4]`` flattened to ``D·T/4`` for ``Linear(32 * 5, 6)``."""

    def __init__(self):
        super().__init__()
        self.W_P, self.head = nn.Linear(4, 32), nn.Linear(32 * 5, 6)

    def forward(self, x):
        z = self.W_P(x.permute(0, 2, 1).unfold(dimension=-1, size=4, step=4))
        return self.head(z.permute(0, 1, 3, 2).flatten(start_dim=-2))


def test_a_patch_embedding_makes_the_features_and_its_patches_read_out_per_series_are_no_finding():
    """A linear over each patch's steps (``T%4``, its patches ``T/4`` beside it) is a patch embedding: its width
    is the model's ``D`` (unnamed on 2fe0908) and it mixes no tokens (``projection-over-tokens`` there); its
    patches, read whole from then on, flattened with ``D`` beside the batch and the series ``V`` (a declared axis
    with no role) are a readout (on 2fe0908: ``mixed-axis`` on the flatten, ``D`` unnamed: ``?·T/4``). Two false
    errors on correct code gone."""
    torch.manual_seed(0)
    x = torch.randn(2, 20, 3)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=20 V=3 D=32 H=4") as t:
        _Patched()(x)
    assert [(e.op, e.outputs[0].dims) for e in t.events] == [
        ("permute", ("B", "V", "T")), ("unfold", ("B", "V", "T/4", "T%4")), ("linear", ("B", "V", "T/4", "D")),
        ("permute", ("B", "V", "D", "T/4")), ("flatten", ("B", "V", "D*T/4")), ("linear", ("B", "V", None))]
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == []


def test_a_linear_over_every_fourth_token_is_still_a_projection_over_tokens():
    """The outer piece ``T/4`` read by a linear (the steps ``T%4`` beside it): each output mixes tokens four apart,
    no patch: the finding stays."""
    torch.manual_seed(0)
    proj = nn.Linear(5, 32)
    x = torch.randn(2, 20, 3)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=20 V=3 D=32 H=4") as t:
        proj(x.permute(0, 2, 1).unfold(dimension=-1, size=4, step=4).transpose(-2, -1))
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity == "error"] == [
        ("error", "projection-over-tokens")]


class _InnerMaps(nn.Module):
    """timm's TNT in small: each of an image's N patches is a small image of its own; a conv maps it to a
    ``[Hp, Wp]`` grid of C features, and ``[B·N, Hp·Wp, C]`` is reshaped to ``[B, N, Hp·Wp·C]`` (each patch's
    whole inner map side by side) for the linear that makes the patch's embedding (``TNT.proj``)."""

    def __init__(self, wrong: bool = False):
        super().__init__()
        self.conv, self.wrong = nn.Conv2d(3, 6, 2, 2), wrong
        self.proj = nn.Linear(2 * 6 if wrong else 4 * 6, 32)

    def forward(self, pixels):                              # (B·N, 3, 4, 4): the N patches of B images
        inner = self.conv(pixels)                           # (B·N, C, Hp, Wp)
        if self.wrong:                                      # a map cut in two: half its channels per row
            return self.proj(inner.reshape(2, 8, -1))       # (B, N·2, C/2·Hp·Wp): no map whole
        inner = inner.flatten(2).transpose(1, 2)            # (B·N, Hp·Wp, C)
        return self.proj(inner.reshape(2, 4, -1))           # (B, N, Hp·Wp·C) -> (B, N, D)


def _maps(wrong: bool):
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=32") as t:
        _InnerMaps(wrong)(torch.randn(8, 3, 4, 4))
    return t


def test_a_convolution_s_whole_maps_read_out_by_a_linear_is_no_finding():
    """Fails on d04b913 (``('error', 'projection-over-tokens')``, timm's TNT ``✗`` on first sight): the linear
    reads the whole grid ``Hp·Wp`` with all its channels, each patch's map apart from the others."""
    t = _maps(wrong=False)
    assert [e.op for e in t.events] == ["conv2d", "flatten", "transpose", "reshape", "linear"]
    assert t.events[2].outputs[0].dims == (None, "N", None)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == []


def test_a_map_cut_across_its_channels_keeps_its_finding():
    """The same maps cut in two, ``[B·N, C, Hp, Wp].reshape(B, 2·N, C/2·Hp·Wp)``: the linear's axis holds half of
    the channels (not whole), so no map is read whole and the finding stays."""
    t = _maps(wrong=True)
    assert [(e.op, e.outputs[0].shape) for e in t.events] == [("conv2d", (8, 6, 2, 2)), ("reshape", (2, 8, 12)),
                                                                ("linear", (2, 8, 32))]
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics] == [("error", "projection-over-tokens", 1)]


def test_heads_merged_with_the_grid_keep_their_error():
    """``[B, H, N, d_k]`` over a conv's grid merged as ``reshape(B, N, H·d_k)`` at N == H: the last axis holds the
    grid with a piece of ``D`` (``d_k``), not a whole map; the linear reading it keeps ``projection-over-tokens``
    or the merge its finding."""
    torch.manual_seed(0)
    conv, qkv, out = nn.Conv2d(3, 32, 4, 4), nn.Linear(32, 32), nn.Linear(32, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=32 H=4") as t:
        x = conv(torch.randn(2, 3, 8, 8)).flatten(2).transpose(1, 2)       # (B, N=4, D)
        q = qkv(x).view(2, 4, 4, 8).transpose(1, 2)                          # (B, H, N, d_k)
        out(q.reshape(2, 4, 32))                                             # bug: no transpose back
    assert t.events[-2].outputs[0].dims == ("B", "H", "N*d_k")
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("error", "tokens-merged-with-features")]
