"""engine/reductions.py and engine/rules/reductions.py: which axes an op computes along, read from its
recorded parameters, and that axis's role against what the op reduces (issue 33 item 4). The corpus
in tests/corpus/test_reductions.py runs the same rule on code in the styles of public projects."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import shapetrace
from shapetrace.engine.ops import spec_for
from shapetrace.engine.reductions import axes_along

SIZES = [(2, 5, 24, 3), (4, 4, 16, 4)]   # distinct, and B = T = H = d_k = 4


@pytest.mark.parametrize(("how", "params", "rank", "along"), [
    ("reduce", {"dim": 1, "keepdim": False}, 4, (1,)),
    ("reduce", {"dim": -1, "keepdim": True}, 4, (3,)),
    ("reduce", {"dim": [-1, 1], "keepdim": False}, 4, (1, 3)),
    ("reduce", {"keepdim": False}, 3, (0, 1, 2)),            # x.mean(): every axis
    ("reduce", {"dim": 4, "keepdim": False}, 4, None),       # out of range: not read
    ("reduce", {"elementwise": True}, 4, None),              # torch.max(a, b)
    ("softmax", {"dim": -2}, 4, (2,)),
    ("scan", {"dim": 0}, 2, (0,)),
    ("softmax", {}, 4, None),                                # no dim recorded: not read, never guessed
    ("normalise", {"normalised": 1}, 3, (2,)),               # layer_norm(x, (D,))
    ("normalise", {"normalised": 2}, 4, (2, 3)),
])
def test_axes_along_reads_the_recorded_dim(how, params, rank, along):
    assert axes_along(how, params, rank) == along


def test_norm_and_normalize_take_their_dim_after_p():
    """``Tensor.norm(p, dim)`` and ``F.normalize(x, p, dim=1)``: the second argument is p, not a dim."""
    def dim_second(op):
        return getattr(spec_for(op).params, "dim_second", False)

    assert (dim_second("norm"), dim_second("normalize"), dim_second("sum")) == (True, True, False)


def _per_head(x, H):
    B, T, D = x.shape
    return x.view(B, T, H, D // H).transpose(1, 2)                      # (B, H, T, d_k)


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_normalize_records_its_default_dim_and_keeps_the_names(B, T, D, H):
    """``F.normalize(q)`` runs along torch's default dim=1, recorded as such; its result keeps q's names."""
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        F.normalize(_per_head(x, H))                                    # (B, H, T, d_k)
    e = t.events[-1]
    assert (e.op, e.params["dim"], e.outputs[0].dims) == ("normalize", 1, ("B", "H", "T", "d_k"))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["reduction-over-wrong-axis"]
    assert t.diagnostics[0].message == (
        f"normalize #2 runs along axis 1 (H, the heads) of the per-head values [B={B}, H={H}, T={T}, d_k={D // H}]: "
        f"each result mixes the {H} heads' vectors, so the heads are no longer apart.")


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_max_over_a_dim_names_values_and_indices_and_max_of_two_tensors_broadcasts(B, T, D, H):
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        q = _per_head(x, H)                                             # (B, H, T, d_k)
        q.max(dim=-1)                                                   # (B, H, T) x 2
        torch.max(q, q * 2)                                             # (B, H, T, d_k)
    by_dim, elementwise = t.events[2], t.events[3]
    assert [o.dims for o in by_dim.outputs] == [("B", "H", "T"), ("B", "H", "T")]
    assert elementwise.outputs[0].dims == ("B", "H", "T", "d_k")
    assert [d for d in t.diagnostics if d.severity != "note"] == []


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_a_batch_reduction_of_per_head_values_is_a_finding(B, T, D, H):
    """``k - k.mean(0)``: a statistic over the batch taken inside attention mixes the sequences."""
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        k = _per_head(x, H)                                             # (B, H, T, d_k)
        k - k.mean(dim=0, keepdim=True)                                 # (B, H, T, d_k)
    found = [d for d in t.diagnostics if d.severity == "error"]
    assert [(d.kind, d.event) for d in found] == [("reduction-over-wrong-axis", 2)]
    assert found[0].message.startswith("mean #2 runs along axis 0 (B, the batch entries) of the per-head values")
    assert found[0].fix == "Reduce or normalise along an axis of one sequence (each head's features: dim=-1)."


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_heads_projected_to_the_model_width_and_summed_are_silent(B, T, D, H):
    """The output projection written per head and summed over the heads (``einsum('bhtd,hdm->btm')`` as
    a product then a sum, as mesh-tensorflow's and T5's per-head ``o`` weights read): each head's output
    is already in the model's features, so the sum over heads is the merge, not a mix."""
    x, w_o = torch.randn(B, T, D), torch.randn(H, D // H, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(w_o, "H d_k D")
        q = _per_head(x, H)                                             # (B, H, T, d_k)
        y = (q @ q.transpose(-2, -1)).softmax(dim=-1) @ q               # (B, H, T, d_k)
        (y @ w_o).sum(dim=1)                                            # (B, T, D)
    assert t.events[-1].inputs[0].dims == ("B", "H", "T", "D")
    assert [d for d in t.diagnostics if d.severity != "note"] == []


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_a_reduction_along_an_unnamed_axis_is_not_checked(B, T, D, H):
    """Its result may be all named ([B]) while the axis it ran along was not: the verdict says so."""
    x, extra = torch.randn(B, T, D), torch.randn(B, 7)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(extra, ["B", None])
        _per_head(x, H)                                                 # (B, H, T, d_k)
        extra.sum(dim=-1)                                               # (B,)
    v = t.report().verdict
    assert (v.mark, v.unchecked) == ("?", ((2, "sum"),))
    assert v.line.startswith("? checked 2 of 3 ops that could carry a layout bug; not checked (unnamed axes): #2 sum")


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
@pytest.mark.parametrize(("dim", "words"), [(1, "H, the heads"), (0, "B, the batch entries"), (2, "T, query")])
def test_softmax_over_heads_batch_or_queries_is_an_error_at_any_sizes(B, T, D, H, dim, words):
    """The attention normalisation runs over the keys; over the heads, the batch or the queries of the
    scores it is softmax-wrong-axis, with the axis's role in words."""
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        q = _per_head(x, H)                                             # (B, H, T, d_k)
        (q @ q.transpose(-2, -1)).softmax(dim=dim)                      # (B, H, T, T)
    assert [(d.kind, d.event) for d in t.diagnostics if d.severity == "error"] == [("softmax-wrong-axis", 4)]
    assert t.diagnostics[0].message == (
        f"softmax #4 normalises over axis {dim} ({words}) of the scores [B={B}, H={H}, T={T}, T={T}]; each "
        "query's weights must sum to 1 over the keys, axis -1.")


def _grouped_scores(x, H, out):
    """fkodom/grouped-query-attention-pytorch's ``scaled_dot_product_gqa``: ``H`` query heads over ``H // 2``
    key heads, the queries viewed ``(B, g, h, T, d)``, scores by ``einsum("bghnd,bhsd->" + out)``."""
    B, T, D = x.shape
    d = D // H
    q = x.view(B, T, H, d).transpose(1, 2).reshape(B, H // 2, 2, T, d).transpose(1, 2)   # (B, g, h_kv, T, d)
    k = x[..., : D // 2].reshape(B, T, H // 2, d).transpose(1, 2)                      # (B, h_kv, T, d)
    return torch.einsum(f"bghnd,bhsd->{out}", q, k)


@pytest.mark.parametrize(("B", "T", "D", "H"), [(2, 5, 24, 4), (4, 4, 32, 4)])
def test_scores_that_sum_the_query_heads_sharing_a_key_head_are_an_error(B, T, D, H):
    """fkodom/grouped-query-attention-pytorch issue #5: ``-> bhns`` sums the g query heads into one score.
    Fails on 90e1ad1 (the einsum rule read only values whose features it keeps): a false ``✓`` with
    ``H_kv`` declared."""
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H} H_kv={H // 2}") as t:
        shapetrace.name(x, "B T D")
        _grouped_scores(x, H, "bhns")
    found = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in found] == ["reduction-over-wrong-axis"]
    assert found[0].message.startswith(f"einsum #{found[0].event} sums over axis 1 (n_rep, the heads) of "
                                       f"[B={B}, n_rep=2, H_kv={H // 2}, T={T}, d_k={D // H}] as it takes the "
                                       "dot products over the head features")


@pytest.mark.parametrize(("B", "T", "D", "H"), [(2, 5, 24, 4), (4, 4, 32, 4)])
def test_scores_that_keep_every_query_head_are_silent(B, T, D, H):
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H} H_kv={H // 2}") as t:
        shapetrace.name(x, "B T D")
        _grouped_scores(x, H, "bghns")
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []


def _rms_norm_traced(dim):
    """A hand-written RMSNorm (OLMoE's q/k norm over the whole width) whose variance runs along ``dim``."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        variance = x.pow(2).mean(dim, keepdim=True)
        y = x * torch.rsqrt(variance + 1e-5)
        y.view(2, 6, 4, 8)                                                 # (B, T, H, d_k): a row that reads it
    return t


def test_a_norms_statistic_over_the_tokens_read_back_on_them_is_a_warning():
    """On f714c55 (main) OLMoE's q/k RMSNorm with its variance over ``dim=1`` (the tokens of ``[B, T, D]``) was
    ``✓`` without dependency contracts (tests/corpus/public16/olmoe_qknorm.py norm-over-tokens); now a warning."""
    t = _rms_norm_traced(1)
    found = [(d.severity, d.kind, d.event) for d in t.diagnostics if d.severity != "note"]
    assert found == [("warning", "normalised-over-tokens", 0)]
    message = next(d.message for d in t.diagnostics if d.kind == "normalised-over-tokens")
    assert message.startswith("mean #0 takes a statistic of [B=2, T=6, D=32] along axis 1 (T, the tokens) and "
                              "view #1 reads it back on those tokens")


def test_a_norms_statistic_over_each_tokens_features_is_silent():
    t = _rms_norm_traced(-1)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def test_a_mean_over_the_tokens_read_as_a_summary_is_silent():
    """A mean over the tokens that never comes back onto them (pooled for a head) is no norm."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        torch.nn.functional.linear(x.mean(1, keepdim=True), torch.randn(10, 32))   # (B, 1, classes)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def _sequence_rms_traced(dims, keepdim=False, batch=True):
    """bkitano/llama-from-scratch issue #4's RMSNorm: one root mean square per sequence, over ``dims`` of
    ``[B, T, D]``, unsqueezed back (or kept) and divided into every token, then a row that reads it."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        rms = torch.linalg.norm(x, dim=dims, keepdim=keepdim) * 192 ** -.5
        if not keepdim:
            rms = rms.unsqueeze(-1).unsqueeze(-1) if batch else rms
        y = x / rms
        y.view(2, 6, 4, 8)                                                 # (B, T, H, d_k): a row that reads it
    return t


@pytest.mark.parametrize(("keepdim", "reader"), [(False, 3), (True, 1)])   # (two unsqueezes first where not kept)
def test_a_norm_over_the_tokens_and_features_of_each_sequence_is_a_warning(keepdim, reader):
    """On f0e0295 (main) the RMS over ``dim=(1, 2)`` of ``[B, T, D]`` (tests/corpus/reports9/llama_scratch_rmsnorm
    rms-over-sequence) was ``✓`` without dependency contracts: the statistic ran along two axes, and squeezed
    away; now the same warning as a statistic over the tokens alone."""
    t = _sequence_rms_traced((1, 2), keepdim)
    found = [(d.severity, d.kind, d.event) for d in t.diagnostics if d.severity != "note"]
    assert found == [("warning", "normalised-over-tokens", 0)]
    message = next(d.message for d in t.diagnostics if d.kind == "normalised-over-tokens")
    assert message == ("norm #0 takes a statistic of [B=2, T=6, D=32] along axis 1 (T, the tokens) and "
                       f"view #{reader} reads it back on those tokens: each token's features are scaled by "
                       "statistics of all 6 tokens, the later ones included.")


def test_a_norm_over_every_axis_batch_included_is_silent():
    """One scale for the whole batch (a per-tensor quantisation scale) keeps no batch axis apart: not judged."""
    t = _sequence_rms_traced(None, batch=False)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def _pooled_traced(pool):
    """Scores over a right-padded batch ([B, H, T, T], the second row's last 2 keys hidden by an additive
    [B, 1, 1, T] mask), the heads merged to [B, T, D], then pooled by ``pool(h, mask)``."""
    q, x = torch.randn(2, 4, 6, 8), torch.randn(2, 6, 32)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])                                      # (B, T): 1 = token
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(x, "B T D")
        shapetrace.name(mask, "B T")
        scores = q @ q.transpose(-1, -2) + (1.0 - mask[:, None, None, :].float()) * -1e9  # (B, H, T, T)
        h = (scores.softmax(-1) @ q).transpose(1, 2).reshape(2, 6, 32) + x                # (B, T, D)
        pool(h, mask)
    return t


def test_a_mean_over_padded_tokens_is_a_warning():
    """On f0e0295 (main) ``h.mean(dim=1)`` after attention that hid padding keys (jsboige/CoursIA issue #15045;
    tests/corpus/reports9/coursia_mean_pooling mean-over-padding) was ``✓``; now a warning."""
    t = _pooled_traced(lambda h, mask: h.mean(dim=1))
    found = [(d.severity, d.kind) for d in t.diagnostics if d.severity != "note"]
    assert found == [("warning", "pooled-over-padding")]
    d = next(d for d in t.diagnostics if d.kind == "pooled-over-padding")
    assert d.message == ("mean #8 averages [B=2, T=6, D=32] over axis 1 (T, the tokens), whose padding add #3 hides "
                         "from the attention with a mask of one row per batch entry: the padded positions enter each "
                         "sequence's average, so its pooled vector changes with the padding its batch needs.")


def test_a_masked_average_and_a_mean_without_padding_are_silent():
    masked = _pooled_traced(lambda h, mask: (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True))
    assert [d.kind for d in masked.diagnostics if d.severity != "note"] == []
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        torch.nn.functional.linear(x, torch.randn(32, 32)).mean(dim=1)                   # no mask anywhere
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def _expanded_norm_traced(dim):
    """jadore801120/attention-is-all-you-need-pytorch PR #17's LayerNormalization, the last thing run (no row
    reads its result): ``mu``, ``sigma`` kept beside the axis, ``expand_as(z)`` back onto z (z made by a recorded
    op, so the statistic is known to come back onto the tensor it was taken from)."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        z = x.view(2, 6, 32)                                                               # (B, T, D)
        mu = torch.mean(z, dim=dim, keepdim=True)
        sigma = torch.std(z, dim=dim, keepdim=True)
        (z - mu.expand_as(z)) / (sigma.expand_as(z) + 1e-3)
    return t


def test_a_statistic_over_the_tokens_expanded_back_onto_them_is_a_warning():
    """On 6ade507 (main's rules) ``mu.expand_as(z)`` read the statistic directly, through a row, and no later
    row read the normalised result: the mean and std over ``dim=1`` were ``✓``
    (tests/corpus/reports9/aiayn_layer_normalization stats-over-positions); now a warning each."""
    t = _expanded_norm_traced(1)
    found = [(d.severity, d.kind, d.event) for d in t.diagnostics if d.severity != "note"]
    assert found == [("warning", "normalised-over-tokens", 1), ("warning", "normalised-over-tokens", 2)]
    message = next(d.message for d in t.diagnostics if d.kind == "normalised-over-tokens")
    assert message.startswith("mean #1 takes a statistic of [B=2, T=6, D=32] along axis 1 (T, the tokens) and "
                              "expand_as #3 reads it back on those tokens")
    assert "std #2 takes a statistic" in t.diagnostics[1].message
    assert [d.kind for d in _expanded_norm_traced(-1).diagnostics if d.severity != "note"] == []


def test_a_mean_over_the_tokens_prepended_as_a_summary_token_is_silent():
    """On 062deef (main) CLIP's ``AttentionPool2d`` (tests/corpus/public24/clip_attnpool, correct) was ``!``: the
    positions' mean joined to them by ``cat`` was read as a statistic spread back onto the tokens it was taken
    from; a join puts it beside them, a summary token, and scales none. The same mean added back stays a
    warning."""
    x = torch.randn(2, 32, 15)
    with shapetrace.trace(dims="B=2 N=15 D=32 H=4") as t:
        shapetrace.name(x, "B D N")
        z = x.permute(2, 0, 1)                                                             # (N, B, D)
        torch.cat([z.mean(dim=0, keepdim=True), z], dim=0)                                 # (1+N, B, D)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity != "note"] == []
    with shapetrace.trace(dims="B=2 N=15 D=32 H=4") as t:
        shapetrace.name(x, "B D N")
        z = x.permute(2, 0, 1)
        (z - z.mean(dim=0, keepdim=True)).view(15, 2, 4, 8)                                # back onto the tokens
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics if d.severity != "note"] == \
        [("warning", "normalised-over-tokens", 1)]


def _stabilised(dim):
    """LayoutLMv3's ``cogview_attention`` (transformers, modeling_layoutlmv3.py): the scores divided by ``alpha``,
    their max subtracted, multiplied back, then ``Softmax(dim=-1)``; ``dim``: the axis the max is taken along."""
    torch.manual_seed(0)
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        q = x.view(2, 6, 4, 8).transpose(1, 2)                                    # (B, H, T, d_k)
        scores = q @ q.transpose(-1, -2) / 32                                     # (B, H, T, T)
        shifted = (scores - scores.amax(dim=dim).unsqueeze(dim)) * 32
        torch.softmax(shifted, dim=-1) @ q                                        # (B, H, T, d_k)
    return t


def test_a_max_over_the_queries_subtracted_before_a_softmax_over_the_keys_is_an_error():
    """The stabiliser's max taken over the queries (``amax(dim=-2)``): each key's column shifted by its own
    constant, which the softmax over the keys does not cancel. On eea3781: ``✓ checked all`` (no rule read what
    was combined into the scores)."""
    t = _stabilised(-2)
    [d] = [d for d in t.diagnostics if d.severity in ("error", "warning")]
    assert (d.severity, d.kind) == ("error", "stabiliser-wrong-axis")
    assert d.message == ("amax #4 takes the max of the scores [B=2, H=4, T=6, T=6] along axis 2 (T), and it is "
                         "combined into them before softmax #6 along axis 3: it differs along the softmax's axis, so "
                         "the softmax does not cancel it as it cancels a max along its own axis, and the weights "
                         "change.")
    assert d.fix == "Take the max along the softmax's axis: .amax(dim=-1, keepdim=True)."


def test_a_max_along_the_softmax_axis_is_the_stabiliser_and_stays_silent():
    t = _stabilised(-1)
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert t.report().verdict.mark == "✓"


def test_softmax_weighted_sum_over_the_tokens_read_back_on_them_is_silent():
    """AFT-simple's pooling (rish-16/aft-pytorch issue #1's fix): ``torch.mul(softmax(K, 1), V).sum(dim=1,
    keepdim=True)`` gating ``sigmoid(Q)``. The weights sum to 1 over the tokens the sum runs over: attention
    pooling, not a norm's statistic. Fails on 28f94c3 (a false warning normalised-over-tokens at the sum)."""
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        q, k, v = (torch.nn.Linear(32, 32)(x).view(2, 6, 32) for _ in range(3))
        pooled = torch.mul(torch.softmax(k, 1), v).sum(dim=1, keepdim=True)   # (B, 1, D)
        torch.mul(torch.sigmoid(q), pooled).view(2, 6, 32)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity != "note"] == []


def test_a_plain_sum_over_the_tokens_read_back_on_them_is_still_a_warning():
    """The same sum without the softmax weights (``(k * v).sum(1, keepdim=True)``) stays a statistic over the
    tokens read back on them: only weights normalised along the summed tokens make it a weighted sum."""
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        q, k, v = (torch.nn.Linear(32, 32)(x).view(2, 6, 32) for _ in range(3))
        pooled = torch.mul(k, v).sum(dim=1, keepdim=True)                        # (B, 1, D)
        torch.mul(torch.sigmoid(q), pooled).view(2, 6, 32)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity != "note"] == [
        ("warning", "normalised-over-tokens")]


@pytest.mark.parametrize(("B", "T", "D", "H"), [(2, 5, 24, 3), (4, 4, 16, 4)])
def test_one_scale_of_the_scores_over_batch_and_keys_is_a_note_and_a_mean_over_heads_an_error(B, T, D, H):
    """A max over every axis of the scores' column sums (Nystromformer's Newton-Schulz start ``1 /
    torch.max(torch.sum(K, dim=-2))``, transformers' default) runs over the keys too: one scale shared by the
    batch, not one set of weights over the keys; a note that leaves ``?``. A mean over the heads that keeps the
    keys still shares one set of weights: an error. lib15: before it, both were errors (a false ``✗`` on
    transformers' NystromformerModel)."""
    x = torch.randn(B, T, D)
    d = D // H

    def scores():
        q = x.view(B, T, H, d).transpose(1, 2)                                        # (B, H, T, d_k)
        return (q @ q.transpose(-1, -2)).softmax(dim=-1)                              # (B, H, T, T)

    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        kernel = scores()
        start = 1 / torch.max(torch.sum(kernel, dim=-2)) * kernel                     # (B, H, T, T) scaled
        start @ x.view(B, T, H, d).transpose(1, 2)                                    # weighs the values
    (found,) = [d for d in t.diagnostics if d.kind == "reduction-over-wrong-axis"]
    assert found.severity == "note"
    assert found.message.startswith(f"max #{found.event} runs along axis 0 (B, the batch entries) of the "
                                    f"attention scores [B={B}, H={H}, T={T}]")
    assert "share one scale of their weights (it runs over the keys too)" in found.message
    assert t.report().verdict.line.startswith("? ")
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        kernel = scores().mean(dim=1, keepdim=True)                                   # (B, 1, T, T)
        kernel @ x.view(B, T, H, d).transpose(1, 2)
    found = [d for d in t.diagnostics if d.kind == "reduction-over-wrong-axis"]
    assert [(d.severity, d.message.split(":")[0]) for d in found] == [("error", (
        f"mean #{found[0].event} runs along axis 1 (H, the heads) of the attention scores [B={B}, H={H}, T={T}, "
        f"T={T}], and matmul #{found[0].event + 3} weighs the values with the result"))]   # (a view, a transpose)
