"""shapetrace/engine/rules/masks.py: masks and scales that read wrong on their values.

On af0e286 (main) the two correct models below were ``✗``: OpenFold's MSA column attention
(tests/corpus/public17/openfold_msa.py), whose mask bias ``[B, T, 1, 1, S]`` hides every sequence of a padded
residue, was ``mask-hides-every-key`` (read as an inverted padding mask), and MEGABYTE's global heads
(tests/corpus/public17/megabyte_patches.py at T = 16, P = 4: heads ``P·D/H`` wide, which is D) scaled by their
own width were ``scale-not-head-dim``. The controls (an inverted padding mask over the batch, heads d_k wide
scaled by 1/√D) keep their findings.

A causal mask added after the softmax (tests/corpus/public27/nemotron.py ``softmax-before-mask``) was ``✓`` on
f00ace0: it is now ``mask-after-softmax`` (so is one on a ``log_softmax``'s output); a mask before the softmax
and a zero fill after it are not."""

from __future__ import annotations

import pytest
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


def _scaled(width, factor):
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 6, width), torch.randn(2, 4, 6, width)
    with shapetrace.trace(dims="B=2 T=6 D=16 H=4") as t:
        ((q @ k.transpose(-1, -2)) * factor).softmax(-1)
    return t


def test_heads_as_wide_as_the_model_scaled_by_their_own_width_get_no_scale_warning():
    t = _scaled(16, 16**-0.5)
    assert ("warning", "scale-not-head-dim") not in _findings(t)


def test_heads_d_k_wide_scaled_by_the_model_width_still_warn():
    t = _scaled(4, 16**-0.5)
    assert _findings(t) == [("warning", "scale-not-head-dim")]
    message = next(d.message for d in t.diagnostics if d.kind == "scale-not-head-dim")
    assert message.startswith("the scores are scaled by 1/√16 = 0.25, the model width D; attention divides by "
                              "√d_k = √4")


def test_scores_scaled_by_the_head_count_warn():
    """pytorch-image-models issue #2385 (tests/corpus/reports7/timm_attention2d_scale.py): ``num_heads ** -0.5``
    where ``dim_head ** -0.5`` is meant; heads 8 wide, 4 of them. No finding on a8dba97."""
    t = _scaled_heads(4 ** -0.5)
    assert _findings(t) == [("warning", "scale-not-head-dim")]
    message = next(d.message for d in t.diagnostics if d.kind == "scale-not-head-dim")
    assert message == ("the scores are scaled by 1/√4 = 0.5, the number of heads H; attention divides by √d_k = √8 "
                       "(the width each query and key is summed over), 0.3536.")


def test_scores_scaled_by_the_head_width_get_no_head_count_warning():
    assert _findings(_scaled_heads(8 ** -0.5)) == []


def _scaled_heads(factor):
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(k, "B H T d_k")
        ((q @ k.transpose(-1, -2)) * factor).softmax(-1)
    return t


class _Prescaled(torch.nn.Module):
    def __init__(self, factor, **kwargs):
        super().__init__()
        self.factor, self.kwargs = factor, kwargs
        self.q_proj, self.k_proj, self.v_proj = (torch.nn.Linear(32, 32, bias=False) for _ in range(3))

    def forward(self, x):
        q = self.q_proj(x).view(2, 6, 4, 8) * self.factor
        k, v = self.k_proj(x).view(2, 6, 4, 8), self.v_proj(x).view(2, 6, 4, 8)
        return torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                                v.transpose(1, 2), **self.kwargs)


def _prescaled_sdpa(factor, **kwargs):
    """maxtext issue #3138 (tests/corpus/reports7/maxtext_mla_double_scale.py): queries projected, scaled by
    ``factor``, then handed to SDPA (``kwargs``: its ``scale=``)."""
    torch.manual_seed(0)
    model, x = _Prescaled(factor, **kwargs), torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        model(x)
    return t


def test_queries_scaled_before_an_sdpa_that_scales_again_warn():
    """No finding on a8dba97."""
    t = _prescaled_sdpa(8 ** -0.5)
    assert _findings(t) == [("warning", "scale-not-head-dim")]
    message = next(d.message for d in t.diagnostics if d.kind == "scale-not-head-dim")
    assert "were already multiplied by 1/√8 = 0.3536" in message
    assert message.endswith("divides by √8 again: the scores are scaled by 1/8, and the softmax is sharper than "
                            "intended by √8.")


def test_queries_scaled_before_an_sdpa_told_scale_one_get_no_warning():
    assert _findings(_prescaled_sdpa(8 ** -0.5, scale=1.0)) == []
    assert _findings(_prescaled_sdpa(1.0)) == []


class _BlockLoop(torch.nn.Module):
    """FlagGems issue #409 (tests/corpus/reports7/flaggems_scale_loop.py): an online softmax over two blocks of
    keys, the scale folded with log2 e either once per block (``grows=False``) or written back (``grows``)."""

    def __init__(self, grows: bool):
        super().__init__()
        self.grows = grows

    def forward(self, q, k):
        scale, out = 8 ** -0.5, []
        for start in (0, 3):
            qk = q @ k[:, :, start:start + 3].transpose(-1, -2)
            if self.grows:
                scale = scale * 1.44269504
                out.append((qk * scale).amax(-1))
            else:
                out.append((qk * (scale * 1.44269504)).amax(-1))
        return out


@pytest.mark.parametrize("grows", [False, True])
def test_a_scale_that_changes_between_calls_of_one_line_warns(grows):
    """No finding on a8dba97 for the growing scale; the steady one gets none either way."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(k, "B H T d_k")
        _BlockLoop(grows)(q, k)
    assert _findings(t) == ([("warning", "scale-not-head-dim")] if grows else [])
    if grows:
        message = next(d.message for d in t.diagnostics if d.kind == "scale-not-head-dim")
        assert "are scaled by 0.5101 after #" in message and "and by 0.7359 after #" in message
        assert message.endswith("one line of code, a scale that changes from call to call (a scale written back "
                                "inside a loop over blocks of keys scales each later block once more).")


def _joint_attention(text_first_mask, dims="B=2 T=6 S=5 D=32 H=4"):
    """Flux-style joint attention over ``cat([text, image])`` tokens, its key mask joined from a padding mask of
    the text and all-True image keys, text first or image first (bghira/SimpleTuner issue #904; round 14's
    tests/corpus/reports14/simpletuner_flux_mask_order.py). No input named: names from sizes alone."""
    sizes = dict(kv.split("=") for kv in dims.split())
    b, t_img, s_txt = int(sizes["B"]), int(sizes["T"]), int(sizes["S"])
    torch.manual_seed(0)
    image, text = torch.randn(b, 4, t_img, 8), torch.randn(b, 4, s_txt, 8)
    text_mask = torch.ones(b, s_txt, dtype=torch.bool)
    text_mask[-1, -2:] = False
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        q = k = v = torch.cat([text, image], dim=2)                          # (B, H, S+T, d_k)
        image_mask = torch.ones(b, t_img, dtype=torch.bool)
        parts = [text_mask, image_mask] if text_first_mask else [image_mask, text_mask]
        mask = torch.cat(parts, dim=1)[:, None, None, :]
        torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return t


def test_a_key_mask_joined_in_another_order_than_the_keys_is_an_error():
    """Fails on d58f65e: the rule that reads a mask's token names against the scores' was skipped whenever the
    names came from sizes alone; now it reads names whose sizes no other declared name has (T = 6, S = 5)."""
    t = _joint_attention(text_first_mask=False)
    assert _findings(t) == [("error", "mask-wrong-axis")]
    message = next(d.message for d in t.diagnostics if d.kind == "mask-wrong-axis")
    assert "the mask's key axis (-1) joins T then S tokens where the scores' keys join S then T" in message
    assert t.report().verdict.line[0] == "✗"


def test_a_key_mask_joined_in_the_keys_order_is_no_error():
    assert _findings(_joint_attention(text_first_mask=True)) == []


def test_equal_sizes_never_decide_a_misjoined_mask():
    """At T = S = 4 (and H = 4) the names rest on sizes that other names share: nothing is read from them."""
    assert _findings(_joint_attention(text_first_mask=False, dims="B=2 T=4 S=4 D=32 H=4")) == []


def _decode_step(cut: bool):
    """One decode step's query ``[B, H, 1, d_k]`` (an unnamed size-1 row) against ``T+1`` cached keys, with the
    additive padding mask of thu-nics/C2C PR #19: all ``T+1`` columns, or (``cut``) the first column alone,
    ``mask[:, :1]``, broadcast over the keys (tests/corpus/reports15/c2c_decode_mask_column.py)."""
    torch.manual_seed(0)
    keep = torch.ones(2, 7)
    keep[1, :2] = 0.0                                                        # the second prompt left-padded by two
    q, k = torch.randn(2, 4, 1, 8), torch.randn(2, 4, 7, 8)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(q, ["B", "H", None, "d_k"])
        shapetrace.name(k, "B H T+1 d_k")
        shapetrace.name(keep, "B T+1")
        mask = keep[:, :1] if cut else keep
        additive = (1.0 - mask[:, None, None, :]) * torch.finfo(torch.float32).min
        (q @ k.transpose(-1, -2) / 8 ** 0.5 + additive).softmax(-1)
    return t


def test_a_decode_mask_cut_to_one_column_and_broadcast_over_the_keys_is_an_error():
    """``✓`` on 67c283c (the step's scores had no query axis, so the addition had no row and no rule read it)."""
    t = _decode_step(cut=True)
    assert _findings(t) == [("error", "mask-wrong-axis")]
    message = next(d.message for d in t.diagnostics if d.kind == "mask-wrong-axis")
    assert "broadcasts the mask [B=2, 1, 1, (T+1)[0:1]=1] over the keys of the scores [B=2, H=4, 1, T+1=7]" \
        in message
    assert "hides all of a row's keys or none of them, never the padding keys alone" in message


def test_a_decode_mask_over_every_key_is_no_error():
    t = _decode_step(cut=False)
    assert _findings(t) == []
    assert t.report().verdict.line[0] == "✓"


def _causal_attention(where: str):
    """Scores ``[B, H, T, T]`` of named q and k, a causal mask of ``finfo.min`` above the diagonal laid on them
    ``before`` the softmax (correct), ``after`` it (Nemotron's lines swapped: tests/corpus/public27/nemotron.py
    ``softmax-before-mask``), filled with ``zero`` after it (dropping weights on purpose), or added to a
    ``log_softmax``'s log-probabilities; then the weights times v."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    with shapetrace.trace(dims="B=2 H=4 T=6 d_k=8") as t:
        for x in (q, k, v):
            shapetrace.name(x, "B H T d_k")
        mask = torch.full((6, 6), torch.finfo(torch.float32).min).triu(1)
        scores = q @ k.transpose(-1, -2) / 8 ** 0.5
        if where == "before":
            weights = (scores + mask).softmax(-1)
        elif where == "after":
            weights = scores.softmax(-1) + mask
        elif where == "zero":
            weights = scores.softmax(-1).masked_fill(mask < 0, 0.0)
        else:
            weights = (scores.log_softmax(-1) + mask).exp()
        weights @ v
    return t


@pytest.mark.parametrize("where", ["after", "log"])
def test_a_causal_mask_added_after_the_softmax_is_an_error(where):
    """On f00ace0 (main): no finding (the add onto the probabilities was read as a causal mask onto the scores,
    hiding the right keys), so ``✓``. After a ``log_softmax`` (then ``exp``) the weights left do not sum to one."""
    t = _causal_attention(where)
    assert _findings(t) == [("error", "mask-after-softmax")]
    d = next(d for d in t.diagnostics if d.kind == "mask-after-softmax")
    op = "softmax" if where == "after" else "log_softmax"
    assert d.message.startswith(f"add #4 lays a mask that hides (values at or below -10000) on the output of {op} #3, "
                                "[B=2, H=4, T=6, T=6]: that softmax already spread its weight over the keys")


@pytest.mark.parametrize("where", ["before", "zero"])
def test_a_mask_before_the_softmax_or_a_zero_fill_after_it_is_no_error(where):
    t = _causal_attention(where)
    assert "mask-after-softmax" not in [d.kind for d in t.diagnostics]
    assert [f for f in _findings(t) if f[0] == "error"] == []


def _weights_times_a_mask(mask_shape: tuple[int, ...], hidden_before: bool = False):
    """Softmaxed weights ``[B, H, T, T]`` multiplied by a
    boolean padding mask of ``mask_shape`` after it (autosome-ru/vigg_ribonanza's ``attention * mask.view(b, 1,
    1, -1)``: tests/corpus/reports28/vigg_ribonanza_pad_rows.py), then the weights times v."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    real = torch.ones(2, 6, dtype=torch.bool)
    real[1, 4:] = False
    with shapetrace.trace(dims="B=2 H=4 T=6 d_k=8") as t:
        for x in (q, k, v):
            shapetrace.name(x, "B H T d_k")
        scores = q @ k.transpose(-1, -2) / 8 ** 0.5
        if hidden_before:
            scores = scores.masked_fill(~real.view(2, 1, 1, 6), torch.finfo(torch.float32).min)
        weights = scores.softmax(-1)
        (weights * real.view(mask_shape)) @ v
    return t


def test_a_boolean_key_mask_multiplied_after_the_softmax_is_an_error():
    """A key mask ``[B, 1, 1, T]`` broadcast over the queries weighs the probabilities by its zeros: the keys it
    drops took their share in the softmax, so the weights left sum to less than one. On f1b5d62 (main) no row
    was made for it (a table had to change along both the queries and the keys, and a boolean one was not kept),
    so ``✓``: the bug of tests/corpus/reports28/vigg_ribonanza_pad_rows.py."""
    t = _weights_times_a_mask((2, 1, 1, 6))
    assert _findings(t) == [("error", "mask-after-softmax")]
    d = next(d for d in t.diagnostics if d.kind == "mask-after-softmax")
    assert d.message.startswith("mul #4 lays a mask that hides (zeros multiplied in) on the output of softmax #2, "
                                "[B=2, H=4, T=6, T=6]: that softmax already spread its weight over the keys")
    assert d.message.endswith("(the weights left sum to less than one).")


@pytest.mark.parametrize("mask_shape", [(2, 1, 1, 6), (2, 1, 6, 1)])
def test_a_mask_laid_again_after_a_masked_softmax_is_no_error(mask_shape):
    """The padded keys hidden before the softmax, then the same padding multiplied onto the weights (vigg's
    reported fix, ``attention * mask2d``, after a masked softmax): its zeros drop no weight the softmax gave, and
    which keys each mask hides is not compared, so no error. The key mask was ``✗ mask-after-softmax`` on 1d92804
    (which first read it); a pair mask ``[B, H, T, T]`` was on f1b5d62 already."""
    t = _weights_times_a_mask(mask_shape, hidden_before=True)
    assert "mask-after-softmax" not in [d.kind for d in t.diagnostics]
    assert [f for f in _findings(t) if f[0] == "error"] == []


def test_padded_query_rows_zeroed_after_the_softmax_are_no_error():
    """The rows of padded queries ``[B, 1, T, 1]`` zeroed after the softmax hide no key from any query."""
    t = _weights_times_a_mask((2, 1, 6, 1))
    assert "mask-after-softmax" not in [d.kind for d in t.diagnostics]
    assert t.report().verdict.mark == "✓"


def _cross_scores_with_base(source: str, T: int = 5, S: int = 7, named: bool = True):
    """diffusers' ``get_attention_scores``: cross-attention scores ``baddbmm(mask, q, kᵀ)`` ``[B·H, T, S]`` whose
    base is a ``(B·H, 1, ·)`` mask padded to the keys' length: from the text tokens' keep mask (``"text"``, the
    right one) or from the image tokens' (``"image"``, the self-attention's, diffusers PR #2656). ``named``: the
    inputs named, else the names are given by sizes alone (as the CLI's ``--dims``)."""
    torch.manual_seed(0)
    x, enc = torch.randn(2, T, 32), torch.randn(2, S, 32)
    keep = torch.ones(2, T if source == "image" else S)
    keep[1, -2:] = 0
    with shapetrace.trace(dims=f"B=2 T={T} S={S} D=32 H=4") as t:
        if named:
            shapetrace.name(x, "B T D")
            shapetrace.name(enc, "B S D")
            shapetrace.name(keep, "B T" if source == "image" else "B S")
        mask = ((1 - keep) * -10000.0).unsqueeze(1)
        mask = torch.nn.functional.pad(mask, (0, S - mask.shape[-1]), value=0.0).repeat_interleave(4, dim=0)
        q = x.reshape(2, T, 4, 8).permute(0, 2, 1, 3).reshape(8, T, 8)
        k = enc.reshape(2, S, 4, 8).permute(0, 2, 1, 3).reshape(8, S, 8)
        torch.baddbmm(mask, q, k.transpose(-1, -2), beta=1, alpha=8 ** -0.5).softmax(-1)
    return t


@pytest.mark.parametrize("named", [True, False], ids=["named", "by-size"])
def test_a_baddbmm_base_padded_from_another_attentions_tokens_is_an_error(named):
    """``✓`` on 5f1c22f (main's rules checked masks filled or added, not a product's base): the image tokens'
    mask ``[B·4, 1, T+2]`` padded onto the text keys S (tests/corpus/reports20/diffusers_self_mask_to_cross)."""
    t = _cross_scores_with_base("image", named=named)
    assert _findings(t) == [("error", "mask-wrong-axis")]
    message = next(d.message for d in t.diagnostics if d.kind == "mask-wrong-axis")
    assert message.startswith("baddbmm #") and "the mask's key axis (-1) holds T+2 tokens where the scores' keys are " \
        "S, so the mask was built for another attention" in message


@pytest.mark.parametrize("named", [True, False], ids=["named", "by-size"])
def test_a_baddbmm_base_from_the_keys_own_tokens_is_no_error(named):
    assert _findings(_cross_scores_with_base("text", named=named)) == []


def test_equal_sizes_never_decide_a_baddbmm_base():
    """Names given by sizes alone at T = H = 4: the image tokens' length is the heads' too, nothing tells T from
    H, no finding (named inputs would prove it, as above)."""
    assert _findings(_cross_scores_with_base("image", T=4, S=6, named=False)) == []


def _masked_then_scaled(width):
    """The LLMs-from-scratch book's ``CausalAttention`` (one head of ``width`` features, no head split, as its
    ``MultiHeadAttentionWrapper`` stacks them): scores ``masked_fill_`` with the causal triangle, then divided by
    ``√keys.shape[-1]``."""
    torch.manual_seed(0)
    x = torch.randn(2, 6, 16)
    wq, wk = torch.nn.Linear(16, width, bias=False), torch.nn.Linear(16, width, bias=False)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=16 H=4") as t:
        keys, queries = wk(x), wq(x)
        scores = queries @ keys.transpose(1, 2)
        scores.masked_fill_(torch.triu(torch.ones(6, 6), diagonal=1).bool(), -torch.inf)
        torch.softmax(scores / 16 ** 0.5, dim=-1)
    return t


def test_a_head_as_wide_as_the_model_masked_then_scaled_by_its_width_gets_no_scale_warning():
    """``! scale-not-head-dim`` on 5f1c22f: the scaling read on the fill, not on the product that summed 16
    features (tests/corpus/reports20/rasbt_mha_wrapper_widths, its twin ``head-width-d-out``)."""
    assert ("warning", "scale-not-head-dim") not in _findings(_masked_then_scaled(16))


def test_a_head_d_k_wide_masked_then_scaled_by_the_model_width_still_warns():
    t = _masked_then_scaled(4)
    assert ("warning", "scale-not-head-dim") in _findings(t)
    message = next(d.message for d in t.diagnostics if d.kind == "scale-not-head-dim")
    assert message.startswith("the scores are scaled by 1/√16 = 0.25, the model width D; attention divides by "
                              "√d_k = √4")


def _mask_head_order(bug):
    """tests/corpus/reports25/sooftware_mask_head_order: scores folded head-major ``[H·B, T, T]``, its lengths
    named ``[B]`` by the user (sizes alone name no one-axis input), the mask tiled batch-major (``bug``) or
    head-major."""
    from tests.corpus.reports25 import sooftware_mask_head_order as m
    model, (x, lengths) = m.build(bug)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(lengths, "B")
        model(x, lengths)
    return t


def test_a_mask_tiled_batch_major_on_scores_folded_head_major_says_to_tile_its_copies_outermost():
    """On 4864b09 the finding said the scores ``[H·B, T, T]`` count "batch entries first" and told the user to
    tile with ``mask.repeat_interleave(H, dim=0)``, which is the very order of the wrong mask ``[B·4, T, T]``
    (the wording of the B·H case, whatever the direction): the fix printed was itself the bug."""
    t = _mask_head_order("mask-batch-major")
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["mask-wrong-batch-order"]
    d = next(d for d in t.diagnostics if d.kind == "mask-wrong-batch-order")
    assert d.message.startswith(
        "masked_fill_ #24 lines up the mask [B·4=8, T=6, T=6] with the scores [H·B=8, T=6, T=6]: axis 0 of the "
        "scores counts heads first (H·B), but the mask was tiled with each sequence's copies side by side (B·4), "
        "so sequence b's mask lands on another sequence's heads.")
    assert d.fix == ("Tile it in the same order: mask.repeat(H, 1, 1) (copies outermost, as the scores fold the "
                     "heads), not mask.repeat_interleave(H, dim=0).")


def test_a_mask_tiled_head_major_on_scores_folded_head_major_is_proven():
    """The mask's order is proven (no finding, every op checked). The verdict is ``?`` for another reason alone:
    the model builds its padding mask from the lengths it was given, and the padding contract was not measured
    (engine/lengths_read.py; ``✓ checked all 26 ops`` before this stop's inputs1 merge and its review mend)."""
    t = _mask_head_order("")
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert t.report().verdict.line.startswith(
        "? checked 26 of 26 ops that could carry a layout bug; not proven: the pads of a mask the model builds "
        "from its lengths were not measured unread; no errors or warnings in what was checked")


def _rows_filled_through_a_boolean_index(tile):
    """d2l's ``masked_softmax`` idiom: scores ``[B·H, T, T]`` (heads folded batch-major) filled through a boolean
    index of their own shape, ``scores[~mask] = -1e6``, the padding mask ``[B, T]`` tiled over the heads by
    ``tile``."""
    torch.manual_seed(0)
    x, pad = torch.randn(2, 6, 64), torch.arange(6)[None, :] < torch.tensor([[6], [4]])
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        q = x.view(2, 6, 4, 16).transpose(1, 2).reshape(8, 6, 16)
        scores = q @ q.transpose(1, 2)
        mask = tile(pad)[:, None, :].expand(8, 6, 6)
        scores[~mask] = -1e6
        scores.softmax(dim=-1)
    return t


def test_a_boolean_index_tiled_head_major_on_scores_folded_batch_major_is_a_wrong_batch_order():
    """A write through a boolean mask of the written tensor's shape is a fill: on 2f9d990 the mask's batch order
    was checked for ``masked_fill`` only, and the same mask written through ``scores[~mask] = -1e6`` (d2l's
    ``sequence_mask``, tests/corpus/public38/d2l_mha.py) was ``✓`` tiled head-major (``mask.repeat(H, 1)``)."""
    t = _rows_filled_through_a_boolean_index(lambda pad: pad.repeat(4, 1))
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == ["mask-wrong-batch-order"]
    d = next(d for d in t.diagnostics if d.kind == "mask-wrong-batch-order")
    assert d.message == ("__setitem__ #8 lines up the mask [4·B=8, 6, T=6] with the scores [B·H=8, T=6, T=6]: "
                         "axis 0 of the scores counts batch entries first (B·H), but the mask was tiled with its "
                         "copies first (4·B), so sequence b's mask lands on another sequence's heads.")
    t = _rows_filled_through_a_boolean_index(lambda pad: pad.repeat_interleave(4, dim=0))
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert t.report().verdict.line.startswith(   # (the mask's query axis, expanded from one entry, has no name)
        "? checked 9 of 10 ops that could carry a layout bug; not checked (unnamed axes): #7 expand; no errors or "
        "warnings in what was checked")


def _mha_with_3d_mask(tile):
    """A padding mask ``[B, T, T]`` widened to nn.MultiheadAttention's ``(B·H, T, T)`` by ``tile`` (ArrowLuo/CLIP4Clip
    issue #22, tests/corpus/reports32/clip4clip_mask_repeat.py): the module views it to ``[B, H, T, T]`` for SDPA."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2).eval()
    x, keep = torch.randn(3, 2, 8), torch.ones(2, 3)
    keep[1, 2] = 0
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=3 D=8 H=2") as t:
        shapetrace.name(x, "T B D")
        mask = ((1.0 - keep[:, None, :]) * -1e6).expand(-1, 3, -1)           # (B, T, T)
        mha(x, x, x, need_weights=False, attn_mask=tile(mask))
    return t


def test_a_kernel_mask_tiled_heads_first_is_found_and_its_interleaved_twin_is_silent():
    """SDPA's ``attn_mask`` viewed ``[copies, H·B…]`` against queries ``[B, H, T, d_k]``: ✓ on 32d4522 (main;
    ``mask-wrong-batch-order`` read only fills and ``baddbmm`` bases, not a kernel's own mask)."""
    t = _mha_with_3d_mask(lambda m: m.repeat(2, 1, 1))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["mask-wrong-batch-order"]
    assert "repeat_interleave(H, dim=0)" in next(d.message for d in t.diagnostics if d.kind == "mask-wrong-batch-order")
    twin = _mha_with_3d_mask(lambda m: m.repeat_interleave(2, dim=0))
    assert not [d for d in twin.diagnostics if d.severity in ("error", "warning")]


def _einsum_column_attention(padding):
    """The MSA Transformer's column attention (tests/corpus/public45/esm_msa_axial.py): ``x`` ``(R, C, B, D)``,
    scores ``einsum("icnhd,jcnhd->hcnij")`` ``[H, C, B, R, R]`` (no query or key role: the einsum's letters say
    none) and the key mask ``padding.permute(2, 0, 1)`` ``[1, C, B, 1, R]`` filled with -10000."""
    torch.manual_seed(0)
    q, k = torch.randn(3, 5, 2, 4, 8), torch.randn(3, 5, 2, 4, 8)
    with shapetrace.trace(dims="B=2 S=3 T=5 D=32 H=4") as t:
        shapetrace.name(q, "S T B H d_k")
        shapetrace.name(k, "S T B H d_k")
        shapetrace.name(padding, "B S T")
        scores = torch.einsum("icnhd,jcnhd->hcnij", q, k)                     # (H, T, B, S, S)
        key_mask = padding.permute(2, 0, 1).unsqueeze(0).unsqueeze(3)           # (1, T, B, 1, S)
        scores.masked_fill(key_mask.bool(), -10000).softmax(-1)
    return t


def test_a_padded_residue_hiding_every_sequence_in_einsum_scores_is_no_reversed_polarity():
    padding = torch.zeros(2, 3, 5)
    padding[-1, :, -1] = 1.0                                                 # the last batch's last residue padded
    assert _findings(_einsum_column_attention(padding)) == []


def test_an_inverted_key_mask_on_einsum_row_scores_still_hides_every_key():
    """The control: the tied row attention's scores ``einsum("rinhd,rjnhd->hnij")`` ``[H, B, T, T]`` carry no
    token axis in front of their queries and keys, so a key mask that hides a whole batch entry is read as
    reversed polarity, as before."""
    torch.manual_seed(0)
    q, k = torch.randn(3, 5, 2, 4, 8), torch.randn(3, 5, 2, 4, 8)
    padding = torch.ones(2, 5)
    padding[-1, -1] = 0.0                                                    # (1 - padding) meant: polarity reversed
    with shapetrace.trace(dims="B=2 S=3 T=5 D=32 H=4") as t:
        shapetrace.name(q, "S T B H d_k")
        shapetrace.name(k, "S T B H d_k")
        scores = torch.einsum("rinhd,rjnhd->hnij", q, k)                      # (H, B, T, T)
        scores.masked_fill(padding.unsqueeze(0).unsqueeze(2).bool(), -10000).softmax(-1)
    assert ("error", "mask-hides-every-key") in _findings(t)


def _chunked(keep: torch.Tensor, width: int = 4):
    """Local attention over chunks of ``width`` tokens, each chunk apart (CANINE's ``from_chunks``/``to_chunks``,
    transformers' ``modeling_canine``), its padding mask added to each chunk's scores; traced."""
    torch.manual_seed(0)
    B, T = keep.shape
    q, k = torch.randn(B, 4, T, 8), torch.randn(B, 4, T, 8)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D=32 H=4") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(k, "B H T d_k")
        for start in range(0, T, width):
            end = min(T, start + width)
            scores = q[:, :, start:end] @ k[:, :, start:end].transpose(-1, -2)     # (B, H, w, w)
            hide = (1.0 - keep[:, None, None, start:end]) * -1e4                      # (B, 1, 1, w)
            (scores + hide).softmax(-1)
    return t


def test_a_later_chunk_all_padding_hides_every_key_by_design():
    """The second sequence ends (5 real tokens of 10) before the last chunk [8:10] begins: that chunk's keys are
    all padding, hidden from its queries, padding too. The corpus sweep at other sizes found public17
    canine_local ``✗ mask-hides-every-key`` at T = 15 and T = 25 on c9a177d; :func:`.rules.masks._a_later_chunk`
    reads the scores' axes as one later chunk of the tokens."""
    keep = torch.ones(2, 10)
    keep[1, 5:] = 0.0
    assert _findings(_chunked(keep)) == []


def test_a_reversed_polarity_hides_the_first_chunk_whole_and_is_still_an_error():
    """The same loop with ``keep * min`` for ``(1 - keep) * min``: the first sequence, unpadded, has its first
    chunk [0:4] hidden whole, and no sequence ends before its first token."""
    keep = torch.ones(2, 10)
    keep[1, 5:] = 0.0
    assert ("error", "mask-hides-every-key") in _findings(_chunked(1.0 - keep))
