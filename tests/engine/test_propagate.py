"""shapetrace/engine/propagate.py: how names flow through an op. Here the pooling ops (``pool``): an axis whose
windows tile it exactly is named by its coarse piece, kept at a kernel of 1, unnamed otherwise.

On main (90e1ad1) every pooling op was unknown to the registry and named nothing: Funnel's
``F.avg_pool2d(x[:, None], (2, 1), stride=(2, 1), ceil_mode=True)[:, 0]`` (tests/corpus/public14/funnel_pool.py)
left its pooled queries unnamed and the correct file at ``? checked 6 of 15``; all three tests fail
there (no pooling event was even recorded)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import shapetrace


def _traced(fn):
    x = torch.randn(2, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        fn(x)
    return t


def test_funnel_pooling_is_named():
    t = _traced(lambda x: F.avg_pool2d(x[:, None], (2, 1), stride=(2, 1), ceil_mode=True)[:, 0])
    assert [(e.op, e.outputs[0].dims) for e in t.events] == [
        ("__getitem__", ("B", None, "T", "D")), ("avg_pool2d", ("B", None, "T/2", "D")),
        ("__getitem__", ("B", "T/2", "D"))]
    assert t.report().verdict.line.startswith("✓ checked all 3 ops")


def test_a_kernel_of_one_keeps_the_axis():
    t = _traced(lambda x: F.max_pool1d(x.transpose(1, 2), 1))
    assert t.events[-1].op == "max_pool1d" and t.events[-1].outputs[0].dims == ("B", "D", "T")


def test_overlapping_windows_leave_the_axis_unnamed():
    t = _traced(lambda x: F.max_pool1d(x.transpose(1, 2), 3, stride=2))
    assert (t.events[-1].op, t.events[-1].outputs[0].dims) == ("max_pool1d", ("B", "D", None))
    assert t.report().verdict.line.startswith("? checked 1 of 2 ops that could carry a layout bug; not checked "
                                              "(unnamed axes): #1 max_pool1d")


def _recurrent(layer, x, dims):
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        layer(x)
    return t


def test_a_recurrent_layer_keeps_the_sequence_and_batch_and_names_its_width():
    """``nn.LSTM``/``nn.GRU`` (``torch._VF.lstm``/``gru``): the output keeps the input's leading axes, in
    either layout, with new features (``2*hidden`` of a bidirectional layer is ``D`` at D's width); the final
    states stay unnamed, so the op is not counted checked. On 514ee53 the registry did not know the op: the
    output was unnamed and every op after it too (tests/corpus/reports5/keqa_softmax_singleton.py: "checked 1
    of 8" before, "8 of 9" after)."""
    torch.manual_seed(0)
    t = _recurrent(torch.nn.LSTM(8, 4, bidirectional=True), torch.randn(6, 2, 8), "B=2 T=6 D=8")
    assert [(e.op, e.inputs[0].dims, e.outputs[0].dims) for e in t.events] == [
        ("lstm", ("T", "B", "D"), ("T", "B", "D"))]
    assert [o.dims for o in t.events[0].outputs[1:]] == [(None, None, None), (None, None, None)]
    t = _recurrent(torch.nn.GRU(8, 5, batch_first=True), torch.randn(2, 6, 8), "B=2 T=6 D=8")
    assert [(e.op, e.outputs[0].dims) for e in t.events] == [("gru", ("B", "T", "F"))]


def test_the_diagonal_skew_of_padded_scores_leaves_its_axes_unnamed():
    """Longformer's ``_pad_and_transpose_last_two_dims`` (and Transformer-XL's ``_rel_shift``): scores ``[B, T,
    T]`` padded to ``[B, T+1, T]`` and viewed ``[B, T, T+1]`` shift each row by one: the new axes hold relative
    offsets. On f714c55 (main) that view was a false ``✗ mixed-axis`` ("holds pieces of T+1 and T")."""
    q = torch.randn(2, 4, 8)
    with shapetrace.trace(dims="B=2 T=4 D=8 H=1") as t:
        shapetrace.name(q, "B T D")
        scores = q @ q.transpose(1, 2)                                     # (B, T, T)
        padded = F.pad(scores, (0, 0, 0, 1))                               # (B, T+1, T)
        padded.view(2, 4, 5)                                               # (B, T, T+1): the skew
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert t.events[-2].outputs[0].dims == ("B", "T+1", "T")
    assert t.events[-1].outputs[0].dims == ("B", None, None)


def test_the_skew_of_scores_over_tokens_cut_by_a_stride_leaves_its_axes_unnamed():
    """Squeezeformer's reduced layers (tests/corpus/public46/squeezeformer_wenet.py): the frames halved by a stride,
    ``T/2``, scores ``[B, T/2, T/2]`` padded by one zero column to ``[B, T/2, 1+T/2]`` and viewed ``[B, 1+T/2,
    T/2]``: the same skew over a token axis whose name is derived. On 836820a it was a false ``✗ mixed-axis``: only
    a declared token name (``T``, whose size dims give) counted as tokens on either side of the pad."""
    q = torch.randn(2, 8, 8)
    with shapetrace.trace(dims="B=2 T=8 D=8 H=1") as t:
        shapetrace.name(q, "B T D")
        qs = q[:, ::2]                                                     # (B, T/2, D)
        scores = qs @ qs.transpose(1, 2)                                   # (B, T/2, T/2)
        zero_pad = torch.zeros(scores.size(0), scores.size(1), 1)          # (B, T/2, 1)
        padded = torch.cat([zero_pad, scores], dim=-1)                     # (B, T/2, 1+T/2)
        padded.view(2, 5, 4)                                               # (B, 1+T/2, T/2): the skew
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert t.events[-2].outputs[0].dims == ("B", "T/2", "1+T/2")
    assert t.events[-1].outputs[0].dims == ("B", None, None)


def test_a_padded_axis_viewed_across_a_batch_neighbour_is_still_a_mix():
    """Only a padded token axis beside another token axis is a skew: padded batch entries viewed across the
    tokens stay a mixed axis (Transformer-XL's shift-batch bug)."""
    x = torch.randn(2, 4, 8)
    with shapetrace.trace(dims="B=2 T=4 D=8 H=1") as t:
        shapetrace.name(x, "B T D")
        F.pad(x, (0, 0, 0, 0, 0, 1)).view(4, 3, 8)                        # bug: (B+1)·T read as [4, 3]
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["mixed-axis"]


def test_interpolate_keeps_the_batch_and_channels_and_names_no_resized_position():
    """``F.interpolate`` (``resample``): Mask2Former's predicted masks ``[B, Q, 2Hp, 2Wp]`` brought to the memory's
    size (tests/corpus/public17/mask2former_masked.py). On af0e286 (main) the registry did not know it and named
    nothing, so the masks' ``repeat(num_heads, 1, 1)`` (heads-major against nn.MultiheadAttention's batch-major
    ``B·H``) was ``?``; now it is ``mask-wrong-batch-order``."""
    x = torch.randn(2, 8, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=8 H=2 Hp=6 Wp=8") as t:
        F.interpolate(x, size=(3, 8), mode="bilinear", align_corners=False)
    e = t.events[-1]
    assert (e.op, e.inputs[0].dims, e.outputs[0].dims) == ("interpolate", ("B", "D", "Hp", "Wp"),
                                                           ("B", "D", None, "Wp"))


def test_mask2formers_masks_tiled_heads_major_are_the_wrong_batch_order():
    from tests.corpus.helpers import round_outcome
    from tests.corpus.public17 import mask2former_masked

    dims = mask2former_masked.DIMS[0]
    assert round_outcome(mask2former_masked, "mask-repeat-heads-major", dims) == ("✗", ("mask-wrong-batch-order",))
    assert round_outcome(mask2former_masked, "", dims) == ("?", ())


def _reduced(kernel: int, stride: int, padding: int):
    """PVT's and SegFormer's spatial reduction (whai362/PVT ``self.sr = nn.Conv2d(dim, dim, sr_ratio,
    stride=sr_ratio)``) on a declared 6 x 4 feature map."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(32, 32, kernel, stride=stride, padding=padding)
    with torch.no_grad(), shapetrace.trace(dims="B=2 Hp=6 Wp=4 D=32 H=4") as t:
        conv(torch.randn(2, 32, 6, 4))                                   # (B, D, Hp/2, Wp/2)
    return t


def test_a_conv_whose_windows_tile_a_declared_grid_names_its_coarse_pieces():
    """Kernel = stride, no padding: each output position is one block of 2 x 2 neighbours, ``Hp/2`` and
    ``Wp/2``, as pooling names them. On a8dba97 both were unnamed (a declared grid of another size)."""
    t = _reduced(2, 2, 0)
    assert t.events[0].outputs[0].dims == ("B", "D", "Hp/2", "Wp/2")


def test_a_conv_whose_windows_overlap_names_no_position():
    t = _reduced(3, 2, 1)
    assert (t.events[0].outputs[0].shape, t.events[0].outputs[0].dims) == ((2, 32, 3, 2), ("B", "D", None, None))


def test_searchsorted_gives_each_value_its_slot_under_the_values_names():
    """OLMo-core's document ids of packed tokens (tests/corpus/reports7/olmo_packed_positions.py):
    ``searchsorted(cu_doc_lens, arange(T), right=True)`` is ``[T]``, as its values; ``bucketize`` the same with
    the values first. Both were unnamed on a8dba97, and so was the document mask built from them."""
    cu_doc_lens = torch.tensor([0, 2, 6])
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        idx = torch.arange(6)
        shapetrace.name(idx, "T")
        doc_ids = torch.searchsorted(cu_doc_lens, idx, right=True) - 1
        same_doc = doc_ids[:, None] == doc_ids[None, :]
        buckets = torch.bucketize(idx, cu_doc_lens)[None, :]
    picks = [e for e in t.events if e.op == "__getitem__"]
    assert [tuple(e.outputs[0].dims) for e in picks] == [("T", None), (None, "T"), (None, "T")]
    assert tuple(same_doc.shape) == (6, 6) and tuple(buckets.shape) == (1, 6)


def test_searchsorted_of_a_number_or_of_unnamed_values_names_nothing():
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        idx = torch.arange(6)
        shapetrace.name(idx, "T")
        torch.searchsorted(idx, 3)[None]
        torch.searchsorted(idx, torch.tensor([1, 4]))[None]
    assert [e.outputs[0].dims for e in t.events if e.op == "__getitem__"] == [(None,), (None, None)]


def _bucketed_biases(two):
    """LayoutLMv3's relative biases (transformers, modeling_layoutlmv3.py ``_cal_1d_pos_emb``/``_cal_2d_pos_emb``):
    distances of the positions ``(B, T)`` shifted to buckets, ``F.one_hot``-ed and read by a bias-free
    ``Linear(buckets, H)``, ``permute(0, 3, 1, 2)``; ``two``: two such biases summed (x and y) before the add."""
    torch.manual_seed(0)
    x, pos = torch.randn(2, 6, 32), torch.arange(6).expand(2, 6)
    to_heads = [torch.nn.Linear(16, 4, bias=False) for _ in range(2)]
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        q = x.view(2, 6, 4, 8).transpose(1, 2)                                      # (B, H, T, d_k)
        rel = pos.unsqueeze(-2) - pos.unsqueeze(-1) + 7                            # (B, T, T)
        biases = [lin(F.one_hot(rel, 16).float()).permute(0, 3, 1, 2) for lin in to_heads[:1 + two]]
        scores = q @ q.transpose(-1, -2) + sum(biases[1:], biases[0])              # (B, H, T, T)
        scores.softmax(dim=-1) @ q
    return t


def test_one_hot_keeps_its_indices_axes():
    """``F.one_hot`` keeps the indices' axes and adds one of the classes, unnamed: on eea3781 it was an unknown op
    and the whole one-hot ``[B, T, T, 16]`` was unnamed (LayoutLMv3's bias Linear left unchecked)."""
    t = _bucketed_biases(two=False)
    linear = next(e for e in t.events if e.op == "linear")
    assert linear.inputs[0].dims == ("B", "T", "T", None)
    assert linear.outputs[0].dims == ("B", "T", "T", "H")
    assert t.report().verdict.line.startswith("✓ checked all 11 ops")


def _conformer_conv(x, dim):
    """SeamlessM4T-v2's conformer convolution module (tests/corpus/public29/seamless_m4t.py): a pointwise conv to
    ``2*D`` channels, ``F.glu`` over the channels, a depthwise conv over time."""
    torch.manual_seed(0)
    pointwise = torch.nn.Conv1d(32, 64, kernel_size=1, bias=False)
    depthwise = torch.nn.Conv1d(32, 32, kernel_size=3, padding=1, groups=32, bias=False)
    return depthwise(F.glu(pointwise(x.transpose(1, 2)), dim=dim)).transpose(1, 2)


def test_glu_halves_its_axis_into_the_gated_piece():
    """``F.glu`` over ``2*D`` channels gives ``D`` channels, and time keeps its name through the depthwise conv.
    Fails on d3df833: ``glu`` was unknown to the registry, its result unnamed, and the depthwise conv's output
    ``[B, ?, N]`` (SeamlessM4T's correct file: ``? checked 44 of 49``, four ops unchecked after the GLU)."""
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        _conformer_conv(x, 1)
    assert [(e.op, e.outputs[0].dims) for e in t.events] == [
        ("transpose", ("B", "D", "T")), ("conv1d", ("B", "2*D", "T")), ("conv1d", ("B", "D", "T")),
        ("transpose", ("B", "T", "D"))]
    assert t.report().verdict.mark == "✓"


def test_adaptive_pooling_keeps_batch_and_channels():
    """``F.adaptive_avg_pool2d`` (``adaptive_pool``): the batch and channel axes keep their names, a resized
    position axis is another grid (unnamed), one of unchanged size keeps its name. On bca23cb the registry did
    not know the op: no event was recorded and every name after it was lost (tests/corpus/public33/
    gcvit_global.py: the global query ``[2, 4, 4, 32]`` fully unnamed, so its ``repeat`` over the windows on
    the wrong axis went unjudged)."""
    x = torch.randn(2, 32, 8, 6)
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=32 Hp=8 Wp=6") as t:
        shapetrace.name(x, "B D Hp Wp")
        F.adaptive_avg_pool2d(x, (4, 6))
        F.adaptive_max_pool1d(x.flatten(2), 3)
    assert [(e.op, e.outputs[0].dims) for e in t.events if e.op.startswith("adaptive")] == [
        ("adaptive_avg_pool2d", ("B", "D", None, "Wp")), ("adaptive_max_pool1d", ("B", "D", None))]


def test_a_conv_over_tokens_padded_by_hand_gives_the_tokens_back():
    """Informer's ``TokenEmbedding`` (zhouhaoyi/Informer2020, models/embed.py; also Autoformer's and the
    Non-stationary Transformer's, tests/corpus/public45/nonstationary_ds.py): ``Conv1d(c_in, D, 3, padding=1,
    padding_mode='circular')`` pads time by hand (``1+T+1``) and then slides a window of three over it with no
    padding of its own, so output position i is the window around step i: the time steps ``T`` again. A causal
    conv (a left pad of ``k - 1``, as Mamba's short conv) reads the same. Fails on 6527aa1: ``[B, D, N]``, the
    tokens renamed as a stem's grid of patches."""
    x = torch.randn(2, 12, 7)
    circular = torch.nn.Conv1d(7, 32, kernel_size=3, padding=1, padding_mode="circular", bias=False)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=12 D=32 H=4") as t:
        shapetrace.name(x, "B T F_in")
        circular(x.transpose(1, 2))                                 # (B, F_in, 1+T+1) -> (B, D, T)
        F.conv1d(F.pad(x.transpose(1, 2), (3, 0)), torch.randn(7, 1, 4), groups=7)   # (B, F_in, 3+T) -> (B, F_in, T)
    assert [(e.op, e.outputs[0].dims) for e in t.events if e.op in ("pad", "conv1d")] == [
        ("pad", ("B", "F_in", "1+T+1")), ("conv1d", ("B", "D", "T")),
        ("pad", ("B", "F_in", "3+T")), ("conv1d", ("B", "F_in", "T"))]


def test_a_conv_over_an_axis_its_padding_left_unnamed_makes_no_grid():
    """The Non-stationary Transformer's ``Projector`` (thuml/Nonstationary_Transformers, layers/Projection.py):
    ``Conv1d(seq_len, 1, 3, padding=1, padding_mode='circular')`` over ``[B, T, F_in]`` slides along the
    variates, whose padding dropped their name: the output positions are the variates, not patches of an image.
    Fails on 6527aa1: named ``N`` (a false name; at B = T it then read ``view(B, -1)`` as a merge of tokens and
    the correct file got ``✗ projection-over-tokens``)."""
    x = torch.randn(2, 12, 7)
    conv = torch.nn.Conv1d(12, 1, kernel_size=3, padding=1, padding_mode="circular", bias=False)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=12 D=32 H=4") as t:
        shapetrace.name(x, "B T F_in")
        conv(x)                                                     # (B, T, 1+F_in+1) -> (B, 1, F_in)
    assert [(e.op, e.outputs[0].dims) for e in t.events] == [("pad", ("B", "T", None)), ("conv1d", ("B", None, None))]
