"""The attention kernels' contracts (shapetrace/engine/contracts.py): each rule fires on its bug and
stays silent on the correct twin, at sizes where axes coincide (T == H, B == T) too; and the torch
behaviour each rule relies on, computed with torch itself.

Cases follow public code and public reports; each cites its source.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace

SDPA = "scaled_dot_product_attention"

#: (B, T, H, d_k): different sizes, T == H, B == T, all equal
SIZES = [(2, 6, 4, 8), (2, 4, 4, 8), (4, 4, 2, 8), (4, 4, 4, 4)]
SIZE_IDS = ["distinct", "T==H", "B==T", "B==T==H==d_k"]


def dims_of(B, T, H, dk, **more):
    return {"B": B, "T": T, "H": H, "D": H * dk, **more}


def traced(fn, dims, *inputs, names=()):
    """Trace ``fn(*inputs)`` with the declared sizes; ``names`` declares the inputs' axes."""
    with torch.no_grad(), shapetrace.trace(dims=dims) as t, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x, n in zip(inputs, names):
            if n:
                shapetrace.name(x, n)
        fn(*inputs)
    return t


def found(t, kind):
    return [d for d in t.diagnostics if d.kind == kind]


def loud(t):
    return [(d.kind, d.message) for d in t.diagnostics if d.severity in ("error", "warning")]


def index_of(t, op=SDPA, nth=0):
    return [e.index for e in t.events if e.op == op][nth]


# ---------------------------------------------------------------------------
# torch's behaviour, as the rules rely on it
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("L,S", [(1, 5), (2, 5), (1, 1), (5, 2)])
def test_torch_is_causal_aligns_top_left(L, S):
    """is_causal=True is ``ones(L, S).tril()``: with L=1 the query sees key 0 only (pytorch#103082)."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, L, 8), torch.randn(1, 2, S, 8), torch.randn(1, 2, S, 8)
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    top_left = torch.ones(L, S, dtype=torch.bool).tril()
    assert torch.allclose(causal, F.scaled_dot_product_attention(q, k, v, attn_mask=top_left), atol=1e-6)
    if L == 1:
        assert torch.allclose(causal, v[..., :1, :], atol=1e-6)   # key 0 only
    if L < S:   # the aligned mask (the last query sees every key) gives another result
        bottom_right = torch.ones(L, S, dtype=torch.bool).tril(S - L)
        assert not torch.allclose(causal, F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right))


def test_torch_sdpa_bool_mask_true_attends_and_mha_true_masks():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8)
    only_key_2 = torch.tensor([[False, False, True]])                  # (1, S)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=only_key_2)
    assert torch.allclose(y, v[..., 2:3, :].expand_as(y), atol=1e-6)          # SDPA: True = attend
    mha = nn.MultiheadAttention(8, 1, batch_first=True)
    x = torch.randn(1, 3, 8)
    _, weights = mha(x, x, x, attn_mask=only_key_2.expand(3, 3))
    assert weights[0, :, 2].abs().max().item() == 0                            # MHA: True = masked
    assert torch.allclose(weights[0, :, :2].sum(-1), torch.ones(3))


def test_torch_sdpa_all_false_row_gives_zeros():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 1, 3, 8), torch.randn(2, 1, 3, 8), torch.randn(2, 1, 3, 8)
    mask = torch.tensor([[False, False, False], [True, True, False]])[:, None, None, :]
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert y[0].abs().max().item() == 0


@pytest.mark.parametrize("shape,picked", [((3, 3, 3, 3), 1), ((4, 4, 4), 0), ((4, 4), 1), ((5,), 0)])
def test_torch_softmax_without_dim_uses_the_legacy_rule(shape, picked):
    """Equal sizes everywhere, so only the axis chosen can tell the results apart."""
    torch.manual_seed(0)
    x = torch.randn(*shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = F.softmax(x)
    assert torch.equal(y, F.softmax(x, dim=picked))
    if len(shape) > 1:
        assert not torch.equal(y, F.softmax(x, dim=-1)) or picked == len(shape) - 1
    assert [str(w.message) for w in caught] == [
        "Implicit dimension choice for softmax has been deprecated. Change the call to include dim=X as an argument."]


def test_torch_gqa_needs_enable_gqa_and_a_divisor():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 2, 3, 8), torch.randn(2, 2, 3, 8)
    grouped = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    repeated = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1))
    assert torch.allclose(grouped, repeated, atol=1e-6)
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        F.scaled_dot_product_attention(q, k, v)
    with pytest.raises(RuntimeError, match="must divide the number of heads"):
        F.scaled_dot_product_attention(q, torch.randn(2, 3, 3, 8), torch.randn(2, 3, 3, 8), enable_gqa=True)


def test_torch_broadcast_lines_up_from_the_right():
    """A [B, T, T] mask on [B, H, T, T] scores with B == H runs, and sequence b's mask lands on head b."""
    B = H = T = 3
    scores = torch.zeros(B, H, T, T)
    mask = torch.zeros(B, T, T, dtype=torch.bool)
    mask[1] = True                                   # sequence 1 fully masked
    out = scores.masked_fill(mask, -1.0)
    assert (out[:, 1] == -1).all() and (out[1, 0] == 0).all()   # every sequence's head 1, not sequence 1


# ---------------------------------------------------------------------------
# sdpa-layout: [B, T, H, d] fed where [B, H, T, d] is due
# ---------------------------------------------------------------------------

class FlashSelfAttention(nn.Module):
    """nanoGPT's CausalSelfAttention with its flash path (karpathy/nanoGPT model.py:
    ``F.scaled_dot_product_attention(q, k, v, ..., is_causal=True)`` on ``(B, nh, T, hs)``)."""

    def __init__(self, n_embd, n_head, transpose=True):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.transpose = n_head, n_embd, transpose

    def forward(self, x):
        B, T, C = x.size()                                                    # (B, T, D)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                    # 3 x (B, T, D)
        q = q.view(B, T, self.n_head, C // self.n_head)                       # (B, T, H, d_k)
        k = k.view(B, T, self.n_head, C // self.n_head)                       # (B, T, H, d_k)
        v = v.view(B, T, self.n_head, C // self.n_head)                       # (B, T, H, d_k)
        if self.transpose:
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, d_k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)          # (B, H, T, d_k)
        if self.transpose:
            y = y.transpose(1, 2)                                             # (B, T, H, d_k)
        return self.c_proj(y.contiguous().view(B, T, C))                      # (B, T, D)


@pytest.mark.parametrize("B,T,H,dk", SIZES, ids=SIZE_IDS)
def test_sdpa_layout_fires_on_heads_left_behind_the_tokens(B, T, H, dk):
    """The bug of NVlabs/FoundationStereo PR #217: ``(B, L, H, E)`` handed to SDPA."""
    torch.manual_seed(0)
    t = traced(FlashSelfAttention(H * dk, H, transpose=False), dims_of(B, T, H, dk), torch.randn(B, T, H * dk),
               names=["B T D"])
    i = index_of(t)
    (d,) = found(t, "sdpa-layout")
    assert (d.severity, d.event) == ("error", i)
    assert d.message == (
        f"{SDPA} #{i} reads q, k and v as [..., L, E] (tokens on axis -2, all axes before them batch), but q is "
        f"[B={B}, T={T}, H={H}, d_k={dk}]: axis -2 holds the heads (H) and the tokens (T) sit on axis -3, a batch "
        f"axis to the kernel. Each token attends over its own {H} heads instead of over the other tokens; torch "
        "only checks that the sizes fit.")
    assert d.fix.startswith("Move the heads ahead of the tokens before the call: q, k, v = (x.transpose(1, 2)")


@pytest.mark.parametrize("B,T,H,dk", SIZES, ids=SIZE_IDS)
def test_sdpa_layout_silent_on_nanogpt_flash(B, T, H, dk):
    torch.manual_seed(0)
    t = traced(FlashSelfAttention(H * dk, H), dims_of(B, T, H, dk), torch.randn(B, T, H * dk), names=["B T D"])
    assert loud(t) == []


def test_sdpa_layout_silent_when_names_are_unknown():
    """No names, no verdict: the shapes of [B, T, H, d] and [B, H, T, d] cannot be told apart at T == H."""
    q = torch.randn(2, 4, 4, 8)
    t = traced(lambda q: F.scaled_dot_product_attention(q, q, q), {}, q)
    assert found(t, "sdpa-layout") == []


# ---------------------------------------------------------------------------
# causal-mask-misaligned: is_causal=True at a decode step
# ---------------------------------------------------------------------------

def decode_step(q_new, k_cache, v_cache, k_new, v_new, is_causal):
    """One KV-cache decode step, the cache appended along the sequence (as GPT-2's legacy tuple cache)."""
    k = torch.cat([k_cache, k_new], dim=2)                                    # (B, H, S+1, d_k)
    v = torch.cat([v_cache, v_new], dim=2)                                    # (B, H, S+1, d_k)
    return F.scaled_dot_product_attention(q_new, k, v, is_causal=is_causal)  # (B, H, 1, d_k)


def decode_inputs(B, H, S, dk):
    torch.manual_seed(0)
    return (torch.randn(B, H, 1, dk), torch.randn(B, H, S, dk), torch.randn(B, H, S, dk),
            torch.randn(B, H, 1, dk), torch.randn(B, H, 1, dk))


@pytest.mark.parametrize("B,S,H,dk", [(2, 5, 4, 8), (2, 3, 4, 8), (4, 3, 4, 4)], ids=["S+1!=H", "S+1==H", "B==S+1==H"])
def test_causal_alignment_fires_at_a_decode_step(B, S, H, dk):
    """pytorch/pytorch#103082 and #144858: is_causal with one query and a cache attends key 0 only."""
    t = traced(lambda *a: decode_step(*a, is_causal=True), {}, *decode_inputs(B, H, S, dk))
    i = index_of(t)
    (d,) = found(t, "causal-mask-misaligned")
    assert (d.severity, d.event) == ("error", i)
    assert d.message == (
        f"{SDPA} #{i} is called with is_causal=True on 1 query [{B}, {H}, 1, {dk}] and {S + 1} keys "
        f"[{B}, {H}, {S + 1}, {dk}]: torch builds the causal mask as ones(1, {S + 1}).tril(), aligned top-left, "
        "so the one query sees key 0 only. With a cache, the new queries are the last positions and should "
        "see every key up to their own.")
    assert d.fix == ("At a decode step the one new query may see every cached key: call it without a mask "
                     "(is_causal=False).")


def test_causal_alignment_fires_on_a_chunk_of_queries():
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 2, 8), torch.randn(1, 2, 5, 8)
    t = traced(lambda q, k: F.scaled_dot_product_attention(q, k, k, is_causal=True), {}, q, k)
    (d,) = found(t, "causal-mask-misaligned")
    assert "so query i sees keys 0..i only, so the last query sees 2 of the 5 keys" in d.message
    assert d.fix == ("Pass a mask aligned bottom-right instead: attn_mask=torch.ones(2, 5, dtype=torch.bool)"
                     ".tril(diagonal=3) (query i then sees keys 0..3+i).")


def test_causal_alignment_more_queries_than_keys_words_what_torch_does():
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 2, 8)
    t = traced(lambda q, k: F.scaled_dot_product_attention(q, k, k, is_causal=True), {}, q, k)
    (d,) = found(t, "causal-mask-misaligned")
    assert "queries 0..1 see keys 0..i and queries 2..4 see all 2 keys" in d.message


@pytest.mark.parametrize("B,S,H,dk", [(2, 5, 4, 8), (4, 3, 4, 4)], ids=["distinct", "equal"])
def test_causal_alignment_silent_on_decode_without_mask_and_on_prefill(B, S, H, dk):
    """transformers' sdpa_attention_forward: ``is_causal = query.shape[2] > 1 and attention_mask is None``."""
    t = traced(lambda *a: decode_step(*a, is_causal=a[0].shape[2] > 1), {}, *decode_inputs(B, H, S, dk))
    assert found(t, "causal-mask-misaligned") == []
    torch.manual_seed(0)
    q = torch.randn(B, H, S, dk)
    t = traced(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True), {}, q)
    assert found(t, "causal-mask-misaligned") == []


# ---------------------------------------------------------------------------
# mask-polarity: nn.MultiheadAttention's masks handed to SDPA
# ---------------------------------------------------------------------------

def sdpa_heads(x, H, mask):
    B, T, D = x.shape                                                         # (B, T, D)
    q = x.view(B, T, H, D // H).transpose(1, 2)                               # (B, H, T, d_k)
    return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)           # (B, H, T, d_k)


@pytest.mark.parametrize("B,T,H,dk", SIZES, ids=SIZE_IDS)
def test_mask_polarity_fires_on_the_mha_causal_mask(B, T, H, dk):
    """rasbt/LLMs-from-scratch#1061: ``torch.triu(ones, diagonal=1).bool()`` handed to SDPA."""
    torch.manual_seed(0)
    future = torch.triu(torch.ones(T, T), diagonal=1).bool()                 # (T, T), True = masked (MHA)
    t = traced(lambda x, m: sdpa_heads(x, H, m), dims_of(B, T, H, dk), torch.randn(B, T, H * dk), future,
               names=["B T D", "T T"])
    i = index_of(t)
    (d,) = found(t, "mask-polarity")
    assert (d.severity, d.event) == ("error", i)
    assert d.message.startswith(f"{SDPA} #{i} gets the boolean mask [T={T}, T={T}] True strictly above the diagonal: "
                                "SDPA reads True as \"attend\", so each query attends only to later keys")
    assert d.fix.endswith("Invert a mask built for the latter: attn_mask=~mask (a causal one is "
                          "torch.ones(L, S, dtype=torch.bool).tril()).")


@pytest.mark.parametrize("B,T,H,dk", SIZES, ids=SIZE_IDS)
def test_mask_polarity_silent_on_the_inverted_masks(B, T, H, dk):
    torch.manual_seed(0)
    future = torch.triu(torch.ones(T, T), diagonal=1).bool()
    x = torch.randn(B, T, H * dk)
    t = traced(lambda x, m: sdpa_heads(x, H, m), dims_of(B, T, H, dk), x, ~future, names=["B T D", None])
    assert found(t, "mask-polarity") == [] and loud(t) == []
    # a float mask in nn.Transformer's form (-inf above the diagonal) is added, not read as a polarity
    additive = nn.Transformer.generate_square_subsequent_mask(T)
    t = traced(lambda x, m: sdpa_heads(x, H, m), dims_of(B, T, H, dk), x, additive, names=["B T D", None])
    assert found(t, "mask-polarity") == [] and found(t, "mask-polarity-unchecked") == []


def test_mask_polarity_fires_on_a_key_padding_mask_in_mha_form():
    """A key_padding_mask (True = padding, pytorch PR #170415's note) handed to SDPA as attn_mask: the
    longest sequence has no padding, so its row is all False and it attends to no key."""
    B, T, H, dk = 2, 4, 4, 8
    lengths = torch.tensor([4, 2])
    padding = torch.arange(T)[None, :] >= lengths[:, None]                  # (B, T), True = padding
    t = traced(lambda x, m: sdpa_heads(x, H, m[:, None, None, :]), dims_of(B, T, H, dk), torch.randn(B, T, H * dk),
               padding, names=["B T D", "B T"])
    i = index_of(t)
    (d,) = found(t, "mask-polarity")
    assert d.message.startswith(f"{SDPA} #{i} gets a boolean key mask [B=2, 1, 1, T=4] with 1 row of no True entry "
                                "(mask index (0, 0, 0)): SDPA reads True as \"attend\"")
    t = traced(lambda x, m: sdpa_heads(x, H, m[:, None, None, :]), dims_of(B, T, H, dk), torch.randn(B, T, H * dk),
               ~padding, names=["B T D", "B T"])
    assert found(t, "mask-polarity") == []


def test_mask_polarity_unread_mask_gets_a_note():
    T = 260   # 67,600 elements: more than the values read at call time
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    q = torch.randn(1, 1, T, 4)
    t = traced(lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m), {}, q, mask)
    (d,) = found(t, "mask-polarity-unchecked")
    assert (d.severity, d.event) == ("note", 0)
    assert d.message == (f"the boolean mask of {SDPA} #0 was not read: 67,600 elements (more than 65,536), so "
                         "whether True means \"attend\" there (SDPA's convention) was not checked.")


# ---------------------------------------------------------------------------
# float-mask-as-bias: a multiplicative 0/1 mask handed to SDPA, which adds float masks
# ---------------------------------------------------------------------------

def test_torch_adds_a_float_mask_to_the_scores():
    """SDPA adds a float attn_mask to the scaled scores (its documented reference implementation;
    pytorch/pytorch#163026 and timeseriesAI/tsai#171 meet it as "the scores are not masked"): a 0/1
    ``tril(ones)`` mask is a bias of one, and every query still attends to later keys."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 8) for _ in range(3))
    ones = torch.tril(torch.ones(5, 5))
    added = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8) + ones, dim=-1) @ v
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=ones), added, atol=1e-6)
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=ones), causal, atol=1e-3)
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=ones.bool()), causal, atol=1e-6)


@pytest.mark.parametrize("B,T,H,dk", SIZES, ids=SIZE_IDS)
def test_float_mask_as_bias_fires_on_a_zero_one_mask(B, T, H, dk):
    """rasbt/LLMs-from-scratch's ``torch.tril(torch.ones(T, T))`` (a mask to multiply the weights by),
    handed to SDPA as attn_mask."""
    torch.manual_seed(0)
    ones = torch.tril(torch.ones(T, T))                                       # (T, T), 1 = keep
    t = traced(lambda x, m: sdpa_heads(x, H, m), dims_of(B, T, H, dk), torch.randn(B, T, H * dk), ones,
               names=["B T D", "T T"])
    i = index_of(t)
    (d,) = found(t, "float-mask-as-bias")
    assert (d.severity, d.event) == ("error", i)
    assert d.message == (f"{SDPA} #{i} gets a float attn_mask [T={T}, T={T}] holding only 0s and 1s (1 on the "
                         "diagonal and below: a causal mask). SDPA adds a float mask to the scores before the "
                         "softmax, so the 1s raise the scores they mark by one and the 0s change nothing: no key "
                         "is hidden, and each query still attends to every key.")
    assert d.fix.startswith("Pass a boolean mask, where True means attend: attn_mask=mask.bool()")


@pytest.mark.parametrize("B,T,H,dk", SIZES, ids=SIZE_IDS)
def test_float_mask_as_bias_silent_on_masks_that_mask(B, T, H, dk):
    torch.manual_seed(0)
    x = torch.randn(B, T, H * dk)
    ones = torch.tril(torch.ones(T, T))
    slopes = torch.arange(T)[None, :] - torch.arange(T)[:, None]               # an ALiBi-like bias: 0, -1, -2 ...
    for mask in (ones.bool(), nn.Transformer.generate_square_subsequent_mask(T), -slopes.abs().float(),
                 torch.zeros(T, T)):
        t = traced(lambda x, m: sdpa_heads(x, H, m), dims_of(B, T, H, dk), x, mask, names=["B T D", None])
        assert found(t, "float-mask-as-bias") == [] and loud(t) == [], mask


# ---------------------------------------------------------------------------
# norm-over-tokens: nn.LayerNorm(D) on a channel-first map whose last axis has D's size
# ---------------------------------------------------------------------------

class ConvStemNorm(nn.Module):
    """An audio stem in openai/whisper's style (Conv1d over frames gives [B, D, N]); ``transpose=False``
    normalises it channel-first, as pytorch/pytorch#71465 (ConvNeXt) and tensorflow/addons#2142 discuss:
    torch runs it whenever the last axis has D's size."""

    def __init__(self, mels: int, dim: int, transpose: bool):
        super().__init__()
        self.conv, self.norm, self.transpose = nn.Conv1d(mels, dim, 3, padding=1), nn.LayerNorm(dim), transpose

    def forward(self, x):
        y = self.conv(x)                                                        # (B, D, N)
        return self.norm(y.transpose(1, 2)) if self.transpose else self.norm(y)  # (B, N, D) or (B, D, N)


@pytest.mark.parametrize("D", [12, 16])
def test_norm_over_tokens_fires_on_a_channel_first_map(D):
    torch.manual_seed(0)
    model = ConvStemNorm(8, D, transpose=False).eval()
    t = traced(model, {"B": 2, "D": D, "H": 4}, torch.randn(2, 8, D))        # D frames: N == D
    (d,) = found(t, "norm-over-tokens")
    i = index_of(t, "layer_norm")
    assert (d.severity, d.event) == ("error", i)
    assert d.message.startswith(f"layer_norm #{i} normalises [B=2, D={D}, N={D}] over its last axis (N), which "
                                "holds tokens, not features")
    assert d.fix.startswith("Put the features last first: x.transpose(1, 2)")


def test_norm_over_tokens_silent_on_features_last_and_sequence_first():
    torch.manual_seed(0)
    t = traced(ConvStemNorm(8, 12, transpose=True).eval(), {"B": 2, "D": 12, "H": 4}, torch.randn(2, 8, 12))
    assert found(t, "norm-over-tokens") == [] and loud(t) == []
    norm = nn.LayerNorm(12)   # open_clip#603: a sequence-first [T, B, D] stream normalised over D is right
    t = traced(lambda x: norm(x.transpose(0, 1)), {"B": 2, "T": 5, "D": 12}, torch.randn(2, 5, 12),
               names=["B T D"])
    assert found(t, "norm-over-tokens") == [] and loud(t) == []


# ---------------------------------------------------------------------------
# gqa-heads: transformers' Llama sdpa_attention (repeat_kv / enable_gqa)
# ---------------------------------------------------------------------------

def repeat_kv(x, n_rep):
    """transformers' integrations/sdpa_attention.py repeat_kv: expand, then reshape."""
    B, H_kv, S, dk = x.shape                                                  # (B, H_kv, S, d_k)
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(B, H_kv, n_rep, S, dk)                    # (B, H_kv, n_rep, S, d_k)
    return x.reshape(B, H_kv * n_rep, S, dk)                                  # (B, H, S, d_k)


def llama_sdpa(q, k, v, mode):
    """transformers' sdpa_attention_forward: repeat_kv unless use_gqa_in_sdpa, then enable_gqa=True."""
    n_rep = q.shape[1] // k.shape[1]
    if mode == "repeat_kv":
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    extra = {"enable_gqa": True} if mode in ("gqa", "repeat_kv+gqa") else {}
    if mode == "repeat_kv+gqa":
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    try:
        return F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] > 1, **extra)
    except RuntimeError:
        return None


def gqa_inputs(B, H, H_kv, T, dk):
    torch.manual_seed(0)
    return torch.randn(B, H, T, dk), torch.randn(B, H_kv, T, dk), torch.randn(B, H_kv, T, dk)


GQA_SIZES = [(2, 4, 2, 6, 8), (2, 4, 2, 4, 8), (2, 2, 1, 2, 2)]
GQA_IDS = ["distinct", "T==H", "B==T==H"]


@pytest.mark.parametrize("B,H,H_kv,T,dk", GQA_SIZES, ids=GQA_IDS)
@pytest.mark.parametrize("mode", ["repeat_kv", "gqa"])
def test_gqa_silent_on_transformers_paths(B, H, H_kv, T, dk, mode):
    t = traced(lambda *a: llama_sdpa(*a, mode), {}, *gqa_inputs(B, H, H_kv, T, dk))
    assert [d.kind for d in t.diagnostics if d.kind.startswith("gqa")] == []


@pytest.mark.parametrize("B,H,T,dk", [(2, 4, 6, 8), (2, 4, 4, 8)], ids=["distinct", "T==H"])
def test_gqa_fires_when_enable_gqa_is_missing(B, H, T, dk):
    t = traced(lambda *a: llama_sdpa(*a, "none"), {}, *gqa_inputs(B, H, 2, T, dk))
    (d,) = found(t, "gqa-heads-mismatch")
    assert (d.severity, d.event) == ("error", 0)
    assert d.message == (
        f"{SDPA} #0 raised: q [{B}, {H}, {T}, {dk}] has {H} heads and k [{B}, 2, {T}, {dk}] has 2; without "
        f"enable_gqa, torch lines up the batch axes of q and k by broadcasting, and axis -3 ({H} against 2) is "
        "neither equal nor 1.")
    assert d.fix == ("For grouped-query attention pass enable_gqa=True (each of the 2 key/value heads serves "
                     f"{H // 2} query heads); repeating k and v with repeat_interleave works too, at the cost of "
                     "a copy.")


def test_gqa_fires_when_kv_heads_do_not_divide():
    t = traced(lambda *a: llama_sdpa(*a, "gqa"), {}, *gqa_inputs(2, 4, 3, 4, 8))
    (d,) = found(t, "gqa-heads-mismatch")
    assert d.message.endswith("with enable_gqa=True each key/value head serves H / H_kv query heads, so H_kv must "
                              "divide H; 3 does not divide 4.")


def test_gqa_note_when_kv_already_repeated():
    """The note needs k's heads proven repeated: H_kv declared below H, k's head axis named H."""
    dims = {"B": 2, "T": 6, "D": 32, "H": 4, "H_kv": 2}
    t = traced(lambda *a: llama_sdpa(*a, "repeat_kv+gqa"), dims, *gqa_inputs(2, 4, 2, 6, 8))
    (d,) = found(t, "gqa-heads-already-repeated")
    assert d.severity == "note"
    assert d.message.startswith(f"{SDPA} #{index_of(t)} is called with enable_gqa=True, but k [B=2, H=4, T=6, "
                                "d_k=8] already has as many heads (4) as q [B=2, H=4, T=6, d_k=8]: there is "
                                "nothing to share.")
    assert loud(t) == []


def test_no_gqa_note_for_a_model_with_as_many_kv_heads_as_heads():
    """transformers passes enable_gqa=True to SDPA even when num_key_value_heads == num_attention_heads
    (sdpa_attention.py's use_gqa_in_sdpa): nothing was repeated, so nothing is said."""
    t = traced(lambda *a: llama_sdpa(*a, "gqa"), {"B": 2, "T": 6, "D": 32, "H": 4}, *gqa_inputs(2, 4, 4, 6, 8))
    assert found(t, "gqa-heads-already-repeated") == [] and loud(t) == []


# ---------------------------------------------------------------------------
# softmax-implicit-dim
# ---------------------------------------------------------------------------

def scores_of(x, H):
    B, T, D = x.shape                                                         # (B, T, D)
    q = x.view(B, T, H, D // H).transpose(1, 2)                               # (B, H, T, d_k)
    return q @ q.transpose(-2, -1) / math.sqrt(D // H)                        # (B, H, T, T)


@pytest.mark.parametrize("B,T,H,dk", SIZES, ids=SIZE_IDS)
def test_softmax_implicit_dim_fires_on_4d_scores(B, T, H, dk):
    """``F.softmax(scores)`` as in the code behind jadore801120/attention-is-all-you-need-pytorch#52 and the
    "Implicit dimension choice" reports (amdegroot/ssd.pytorch#114): on 4-D scores torch picks axis 1 (H)."""
    t = traced(lambda x: F.softmax(scores_of(x, H)), dims_of(B, T, H, dk), torch.randn(B, T, H * dk), names=["B T D"])
    i = index_of(t, "softmax")
    (d,) = found(t, "softmax-implicit-dim")
    assert (d.severity, d.event) == ("error", i)
    assert d.message == (
        f"softmax #{i} is called without dim on [B={B}, H={H}, T={T}, T={T}] (4-D): torch's legacy rule then "
        "normalises over axis 1 (H) (axis 0 for 0-, 1- and 3-D input, axis 1 otherwise), not over the keys "
        "(axis -1): each query's weights do not sum to 1 over the keys.")
    assert d.fix == "Pass the axis: softmax(scores, dim=-1)."


def test_softmax_implicit_dim_fires_on_3d_batched_heads():
    B, T, H, dk = 2, 4, 4, 8
    fn = lambda x: F.softmax(scores_of(x, H).reshape(B * H, T, T))  # noqa: E731
    t = traced(fn, dims_of(B, T, H, dk), torch.randn(B, T, H * dk), names=["B T D"])
    (d,) = found(t, "softmax-implicit-dim")
    assert "(3-D): torch's legacy rule then normalises over axis 0" in d.message
    assert d.severity == "error"


@pytest.mark.parametrize("B,T,H,dk", SIZES, ids=SIZE_IDS)
def test_softmax_implicit_dim_silent_with_dim_and_on_2d(B, T, H, dk):
    x = torch.randn(B, T, H * dk)
    t = traced(lambda x: F.softmax(scores_of(x, H), dim=-1), dims_of(B, T, H, dk), x, names=["B T D"])
    assert found(t, "softmax-implicit-dim") == [] and loud(t) == []
    # 2-D scores [T, T]: the legacy rule picks axis 1, the keys
    t = traced(lambda x: F.softmax(scores_of(x, H)[0, 0]), dims_of(B, T, H, dk), x, names=["B T D"])
    assert found(t, "softmax-implicit-dim") == []


def test_softmax_implicit_dim_note_when_keys_unknown():
    t = traced(lambda x: F.softmax(x), {}, torch.randn(2, 3, 4))
    (d,) = found(t, "softmax-implicit-dim")
    assert d.severity == "note"
    assert d.message == ("softmax #0 is called without dim on [2, 3, 4] (3-D): torch's legacy rule then normalises "
                         "over axis 0 (axis 0 for 0-, 1- and 3-D input, axis 1 otherwise). Which axis holds the keys "
                         "is not known here, so it was not checked.")


# ---------------------------------------------------------------------------
# broadcast-mismatch: a [B, T, T] mask on [B, H, T, T] scores
# ---------------------------------------------------------------------------

def masked_scores(x, mask, H, unsqueeze):
    s = scores_of(x, H)                                                       # (B, H, T, T)
    m = mask.unsqueeze(1) if unsqueeze else mask                              # (B, 1, T, T) or (B, T, T)
    return s.masked_fill(m == 0, float("-inf"))                               # (B, H, T, T)


@pytest.mark.parametrize("B,T,H,dk", [(4, 6, 4, 8), (4, 4, 4, 8), (2, 2, 2, 4)], ids=["B==H", "B==T==H", "all 2"])
def test_broadcast_lineup_fires_on_mask_without_head_axis(B, T, H, dk):
    """hyunwoongko/transformer#32: a [batch, seq, seq] mask on [batch, head, seq, seq] scores; with B == H it runs."""
    mask = torch.ones(B, T, T).tril()
    t = traced(lambda x, m: masked_scores(x, m, H, False), dims_of(B, T, H, dk), torch.randn(B, T, H * dk), mask,
               names=["B T D", "B T T"])
    i = index_of(t, "masked_fill")
    (d,) = found(t, "broadcast-mismatch")
    assert (d.severity, d.event) == ("error", i)
    assert d.message == (
        f"masked_fill #{i} lines up [B={B}, T={T}, T={T}] with [B={B}, H={H}, T={T}, T={T}] from the right: axis -3 "
        f"pairs B (batch) of the first with H (heads) of the second. Both have {B} entries, so torch broadcasts "
        "without complaint, but entry i of B is applied to entry i of H.")
    assert d.fix == ("Give the smaller operand a size-1 axis where the other has H: .unsqueeze(1) (x[:, None]) "
                     f"makes [B={B}, 1, T={T}, T={T}].")


@pytest.mark.parametrize("B,T,H,dk", [(4, 6, 4, 8), (4, 4, 4, 8), (2, 2, 2, 4)], ids=["B==H", "B==T==H", "all 2"])
def test_broadcast_lineup_silent_with_unsqueeze(B, T, H, dk):
    """harvardnlp/annotated-transformer: ``mask = mask.unsqueeze(1)`` (the same mask for all heads)."""
    mask = torch.ones(B, T, T).tril()
    t = traced(lambda x, m: masked_scores(x, m, H, True), dims_of(B, T, H, dk), torch.randn(B, T, H * dk), mask,
               names=["B T D", "B T T"])
    assert found(t, "broadcast-mismatch") == [] and loud(t) == []


def test_broadcast_lineup_fires_on_tokens_against_a_fold_of_batch_and_heads():
    """SpeechT5's relative bias (tests/corpus/public16/speecht5_relpos.py, bug ``bias-view-without-transpose``) at
    T = B·H = 8: ``(T, B·H, T)`` viewed ``(B·H, T, T)`` without the transpose back is a view to the same shape, so
    its names stay ``[T, B·H, T]``, and ``+=`` lines its ``B·H`` up with the scores' ``T``. A fold of batch and heads
    has no one role, but entry i of it is never query i. On c32db91 nothing was said (the fold has no role)."""
    B, H, T = 2, 4, 8

    def fn(scores, bias):
        scores += bias.view(B * H, T, T)                                         # (B·H, T, T) from (T, B·H, T)
        return scores

    t = traced(fn, {"B": B, "T": T, "D": 32, "H": H}, torch.randn(B * H, T, T), torch.randn(T, B * H, T),
               names=["B*H T T", "T B*H T"])
    (d,) = found(t, "broadcast-mismatch")
    assert (d.severity, d.event) == ("error", index_of(t, "add_")) == ("error", 1)
    assert d.message == (
        "add_ #1 lines up [T=8, B·H=8, T=8] with [B·H=8, T=8, T=8] from the right: axis -2 pairs B*H "
        "(batch and heads) of the first with T (tokens) of the second. Both have 8 entries, so torch broadcasts "
        "without complaint, but entry i of B*H is applied to entry i of T.")


def test_broadcast_lineup_silent_on_a_fold_against_one_of_its_parts():
    """``[B·H, T, T]`` scores plus a ``[B·H, 1, T]`` mask repeated per head: the folds line up with each other."""
    t = traced(lambda s, m: s + m, {"B": 2, "T": 6, "D": 32, "H": 4}, torch.randn(8, 6, 6), torch.randn(8, 1, 6),
               names=["B*H T T", "B*H _ T"])
    assert found(t, "broadcast-mismatch") == []


def test_broadcast_lineup_silent_on_unnamed_operands():
    t = traced(lambda s, m: s.masked_fill(m == 0, 0.0), {}, torch.randn(4, 4, 4, 4), torch.ones(4, 4, 4))
    assert found(t, "broadcast-mismatch") == []


@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_without_batch_first_on_batch_first_input_attends_over_the_batch(batch_first):
    """om-ai-lab/OmDet#19: ``nn.MultiheadAttention(d, h)`` (batch_first=False) fed [B, T, D] reads axis 0
    as the sequence; its fused path hands SDPA [T, H, B, d_k]. The twin has batch_first=True."""
    mha = torch.nn.MultiheadAttention(24, 3, batch_first=batch_first).eval()
    x = torch.randn(2, 5, 24)                                                  # (B, T, D)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        mha(x, x, x, need_weights=False)
    found = [d for d in t.diagnostics if d.kind == "attends-over-batch"]
    if batch_first:
        assert found == [] and loud(t) == []
        return
    (d,) = found
    assert d.severity == "error"
    # torch's own SDPA call: said at the user's call, with the fix there (engine/rules/library.py)
    assert d.message.startswith(f"{SDPA} #{d.event} runs inside nn.MultiheadAttention, called by your code at ")
    assert ("): it reads q as [..., L, E], but q is [T=5, H=3, B=2, d_k=8]: axis -2 holds the batch (B) and the "
            "tokens (T) sit in a batch axis.") in d.message
    assert "batch_first=True" in d.fix


# ---------------------------------------------------------------------------
# broadcast-mismatch on elementwise arithmetic: a rotary table lined up with the heads
# ---------------------------------------------------------------------------

def rotate_half(x):
    """huggingface/transformers ``models/llama/modeling_llama.py``: ``rotate_half``."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)                                       # (B, H, T, d_k)


def rotary_scores(x, position_ids, H, unsqueeze_dim):
    """transformers' ``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)``: its docstring says 2 is for
    q laid out [B, T, H, d_k]; passing 2 with [B, H, T, d_k] lines the positions up with the heads."""
    B, T, D = x.shape
    q = x.view(B, T, H, D // H).transpose(1, 2)                               # (B, H, T, d_k)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, D // H, 2).float() / (D // H)))
    freqs = position_ids[:, :, None].float() * inv_freq[None, None, :]        # (B, T, d_k/2)
    emb = torch.cat((freqs, freqs), dim=-1)                                   # (B, T, d_k)
    cos, sin = emb.cos().unsqueeze(unsqueeze_dim), emb.sin().unsqueeze(unsqueeze_dim)
    q = q * cos + rotate_half(q) * sin                                        # (B, H, T, d_k)
    return q @ q.transpose(-2, -1)                                            # (B, H, T, T)


@pytest.mark.parametrize("B,T,H,dk", [(2, 4, 4, 8), (3, 4, 4, 4)], ids=["T==H", "T==H==d_k"])
def test_broadcast_lineup_fires_on_rotary_table_over_heads(B, T, H, dk):
    """Only T == H runs at all (else torch refuses the broadcast); the mul gets a row of its own there."""
    x, pos = torch.randn(B, T, H * dk), torch.arange(T).expand(B, T)
    t = traced(lambda a, p: rotary_scores(a, p, H, 2), dims_of(B, T, H, dk), x, pos)
    muls = [e for e in t.events if e.op == "mul"]
    assert [(list(e.inputs[1].shape), e.inputs[1].dims) for e in muls[:1]] == \
        [([B, T, 1, dk], ("B", "T", None, None))]
    errors = found(t, "broadcast-mismatch")
    assert errors and errors[0].event == muls[0].index and errors[0].severity == "error"
    assert errors[0].message == (
        f"mul #{muls[0].index} lines up [B={B}, T={T}, 1, {dk}] with [B={B}, H={H}, T={T}, d_k={dk}] from the "
        f"right: axis -3 pairs T (tokens) of the first with H (heads) of the second. Both have {H} entries, so "
        "torch broadcasts without complaint, but entry i of T is applied to entry i of H.")


@pytest.mark.parametrize("B,T,H,dk", [(2, 4, 4, 8), (2, 6, 4, 8)], ids=["T==H", "distinct"])
def test_rotary_table_over_tokens_gets_no_row_and_no_finding(B, T, H, dk):
    """The same code with ``unsqueeze_dim=1`` (the default, for [B, H, T, d_k]): elementwise arithmetic keeps
    no row of its own, and nothing is reported."""
    x, pos = torch.randn(B, T, H * dk), torch.arange(T).expand(B, T)
    t = traced(lambda a, p: rotary_scores(a, p, H, 1), dims_of(B, T, H, dk), x, pos)
    assert [e.op for e in t.events if e.op in ("mul", "add", "__mul__", "__add__")] == []
    assert loud(t) == []
    assert t.events[-1].outputs[0].dims == ("B", "H", "T", "T")


# ---------------------------------------------------------------------------
# gqa-head-order: key/value heads tiled with repeat instead of repeated in place
# ---------------------------------------------------------------------------

def gqa_scores(x, k_proj, H, H_kv, how, fused):
    """Llama-style GQA (transformers ``repeat_kv``: expand + reshape) against ``k.repeat(1, n_rep, 1, 1)``,
    the tiling of meta-llama/llama#384-style ports, which pairs query head 1 with key/value head 1."""
    B, T, D = x.shape
    d, n_rep = D // H, H // H_kv
    q = x.view(B, T, H, d).transpose(1, 2)                                    # (B, H, T, d_k)
    k = k_proj(x).view(B, T, H_kv, d).transpose(1, 2)                         # (B, H_kv, T, d_k)
    if how == "tile":
        k = k.repeat(1, n_rep, 1, 1)                                          # (B, n_rep*H_kv, T, d_k)
    elif how == "interleave":
        k = k.repeat_interleave(n_rep, dim=1)                                 # (B, H, T, d_k)
    else:
        k = k[:, :, None].expand(B, H_kv, n_rep, T, d).reshape(B, H, T, d)    # (B, H, T, d_k)
    if fused:
        return F.scaled_dot_product_attention(q, k, k)                        # (B, H, T, d_k)
    return q @ k.transpose(-2, -1)                                            # (B, H, T, T)


@pytest.mark.parametrize("fused", [True, False], ids=["sdpa", "matmul"])
@pytest.mark.parametrize("B,T,H,H_kv,dk", [(2, 5, 4, 2, 6), (2, 4, 4, 2, 4), (3, 3, 6, 3, 3)],
                         ids=["distinct", "T==H", "T==H_kv==d_k"])
def test_gqa_head_order_fires_on_tiled_kv_heads(fused, B, T, H, H_kv, dk):
    k_proj = nn.Linear(H * dk, H_kv * dk)
    t = traced(lambda x: gqa_scores(x, k_proj, H, H_kv, "tile", fused), dims_of(B, T, H, dk, H_kv=H_kv),
               torch.randn(B, T, H * dk))
    (d,) = found(t, "gqa-head-order")
    (seen,) = d.also   # reported at the repeat that tiled the heads, naming the op that pairs them
    assert d.severity == "error" and t.events[d.event].op == "repeat"
    assert t.events[seen].op == (SDPA if fused else "matmul")
    n_rep = H // H_kv
    assert d.message.endswith(
        f"its {H} heads are the {H_kv} key/value heads tiled {n_rep} times (head j is key/value head j mod "
        f"{H_kv}). {t.events[seen].op} #{seen} pairs them with q [B={B}, H={H}, T={T}, d_k={dk}], whose head h is "
        f"meant to read key/value head h // {n_rep}: query head 1 meets key/value head 1 instead of 0. The shapes "
        f"agree, so torch cannot complain.")   # (the op that pairs them is named in it, not listed again)
    # (batch-mismatch on the same op is explained by it)
    assert [x.kind for x in t.diagnostics if x.severity != "note"] == ["gqa-head-order"]
    # what the message says, from torch: tiled head 1 holds kv head 1, repeated head 1 holds kv head 0
    kv = torch.arange(H_kv).view(1, H_kv, 1, 1).float()
    assert kv.repeat(1, n_rep, 1, 1)[0, 1, 0, 0] == 1 and kv.repeat_interleave(n_rep, dim=1)[0, 1, 0, 0] == 0


@pytest.mark.parametrize("how", ["interleave", "expand"])
@pytest.mark.parametrize("fused", [True, False], ids=["sdpa", "matmul"])
def test_gqa_head_order_silent_on_heads_repeated_in_place(how, fused):
    B, T, H, H_kv, dk = 2, 4, 4, 2, 4
    k_proj = nn.Linear(H * dk, H_kv * dk)
    t = traced(lambda x: gqa_scores(x, k_proj, H, H_kv, how, fused), dims_of(B, T, H, dk, H_kv=H_kv),
               torch.randn(B, T, H * dk))
    assert found(t, "gqa-head-order") == [] and loud(t) == []


def test_gqa_head_order_silent_with_one_kv_head():
    """Multi-query attention: tiling one head and repeating it are the same tensor."""
    k_proj = nn.Linear(24, 6)
    t = traced(lambda x: gqa_scores(x, k_proj, 4, 1, "tile", True), dims_of(2, 5, 4, 6, H_kv=1),
               torch.randn(2, 5, 24))
    assert found(t, "gqa-head-order") == []


# -- a slice of a join cut across its parts is not one of them (round 11, tests/corpus/public11/gpt_oss_sinks.py) ----
# gpt-oss's sink column dropped as probs[..., 1:] (the first key dropped instead): the weights' keys (T+1)[1:7]
# summed against the values' T was no finding, and the bug was "? checked 28 of 30 ops" on 14a2e35 (branch r11's
# first commit).

def test_a_cut_across_a_joins_parts_is_told_apart_from_a_part():
    from shapetrace.engine.namer import Namer
    from shapetrace.engine.rules.contracts import contraction_fix, cut_across, part_beside_slice

    namer = Namer({"B": 2, "T": 6, "D": 64, "H": 4})
    assert part_beside_slice("(T+1)[1:7]", "T", namer) == (0, 6)
    assert part_beside_slice("(T+1)[0:6]", "T", namer) is None          # (at the part's bounds: it is T)
    assert part_beside_slice("(1+T)[0:6]", "T", namer) == (1, 7)
    assert part_beside_slice("(T+T)[1:7]", "T", namer) is None          # (T twice: which one is not known)
    assert part_beside_slice("(T+S)[1:7]", "T", namer) is None          # (S has no size)
    assert part_beside_slice("T[1:7]", "T", namer) is None              # (no join)
    assert cut_across("(T+1)[1:7]", "T", namer, namer.dims) == (
        ": (T+1)[1:7] is cut across the parts of T+1, so its entries are not T's (positions 0 to 5 of the join)")
    assert contraction_fix("T", "(T+1)[1:7]", namer, namer.dims) == "Take T at its bounds in T+1: [..., 0:6]."
    assert contraction_fix("d_k", "T", namer, namer.dims) == \
        "If this is q @ k, transpose k first: q @ k.transpose(-2, -1)."


def test_the_sink_dropped_from_the_wrong_end_is_found():
    from tests.corpus.helpers import error_kinds, traced_build
    from tests.corpus.public11 import gpt_oss_sinks

    t = traced_build(gpt_oss_sinks, "drop-first-column", "B=2 T=6 D=64 H=4 H_kv=2")
    assert error_kinds(t) == ["contracts-different-axes"]
    assert t.diagnostics[0].message == (
        "matmul #26 multiplies [B=2, H=4, T=6, (T+1)[1:7]=6] by [B=2, H=4, T=6, d_k=16] and sums over (T+1)[1:7] "
        "of the first with T of the second: different axes that only happen to have the same size (6): "
        "(T+1)[1:7] is cut across the parts of T+1, so its entries are not T's (positions 0 to 5 of the join).")
    assert t.diagnostics[0].fix == "Take T at its bounds in T+1: [..., 0:6]."


# ---------------------------------------------------------------------------
# attends-over-batch: SDPA keys whose token axis holds the batch folded in with the tokens
# ---------------------------------------------------------------------------

def _ip_attention(copies):
    """huggingface/diffusers issue #9813: image embeddings ``[B, N, D]`` repeated once per prompt again
    (``repeat(B, 1, 1)``: ``[B·B, N, D]``) and viewed ``(batch_size, -1, heads, head_dim)`` by the IP-Adapter
    processor: the copies fold into the token axis, ``[B, B·N, H, d_k]``. ``copies`` 1 is the correct twin."""
    def run(x, image):
        batch = x.shape[0]
        ip = image.repeat(batch if copies else 1, 1, 1)
        q = x.view(batch, -1, 2, 4).transpose(1, 2)                               # (B, H, T, d_k)
        k = ip.view(batch, -1, 2, 4).transpose(1, 2)                              # (B, H, B·N, d_k)
        return F.scaled_dot_product_attention(q, k, k)
    return run


@pytest.mark.parametrize("copies", [True, False])
def test_sdpa_keys_holding_the_batch_fold_attend_over_the_batch(copies):
    """Failed on main 781b178 (``✓``: ``plain_role`` of ``B·N`` is none, so the key axis went unjudged)."""
    t = traced(_ip_attention(copies), "B=2 T=5 N=3 D=8 H=2", torch.randn(2, 5, 8), torch.randn(2, 3, 8))
    if not copies:
        assert loud(t) == []
        return
    (d,) = found(t, "attends-over-batch")
    assert d.event == index_of(t)
    assert "axis -2 holds the batch folded in with other entries (B·N)" in d.message


def test_packed_sequences_with_a_block_diagonal_mask_are_no_attention_over_the_batch():
    """Sequences packed into one row (xformers' ``BlockDiagonalMask``, transformers' packed-sequence training):
    the keys' axis holds ``B·T``, and the mask given to SDPA keeps each query inside its own sequence. Names
    alone cannot say which keys a mask hides, so a key axis that folds the batch in is not judged where SDPA
    is given a mask (the dependency contracts measure it)."""
    def run(x):
        b, t, _ = x.shape
        packed = x.reshape(1, b * t, 8)                                           # (1, B·T, D)
        q = packed.view(1, b * t, 2, 4).transpose(1, 2)                           # (1, H, B·T, d_k)
        seq = torch.arange(b).repeat_interleave(t)
        mask = seq[:, None] == seq[None, :]                                       # (B·T, B·T) block-diagonal
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    t = traced(run, "B=2 T=5 D=8 H=2", torch.randn(2, 5, 8))
    assert [d.kind for d in t.diagnostics if d.kind == "attends-over-batch"] == []
