"""Which way a mask or a position bias on the scores points (issue 33 item 4, direction): an ALiBi bias
whose sign is reversed (it favours the farthest keys) and a causal mask that hides the past instead of
the future are findings; ALiBi written as Press et al., as Bloom and as lucidrains write it, and the
causal masks of nanoGPT and the Annotated Transformer, stay silent. At distinct sizes and at equal ones
(B = T = H = d_k = 4): the direction is read from the values along the axes the names say are the
queries and the keys.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from tests.corpus.helpers import Case, corpus_tests

DIMS = "B=2 T=5 D=24 H=3"            # d_k = 8
SQUARE = "B=4 T=4 D=16 H=4"          # B = T = H = d_k = 4


def get_slopes(n_heads: int) -> list[float]:
    """ofirpress/attention_with_linear_biases (fairseq) ``get_slopes`` for a power of two, or the
    geometric sequence it starts from."""
    start = 2 ** (-2 ** -(math.log2(n_heads) - 3))
    return [start * start ** i for i in range(n_heads)]


class AlibiAttention(nn.Module):
    """Causal attention with an ALiBi bias, in three public spellings (``style``):

    * ``"press"``: ofirpress/attention_with_linear_biases, fairseq ``TransformerDecoder``: ``alibi =
      slopes.unsqueeze(1).unsqueeze(1) * torch.arange(maxpos).unsqueeze(0).unsqueeze(0).expand(attn_heads,
      -1, -1)``, a bias of ``slope · j`` per key, added with the future mask;
    * ``"bloom"``: huggingface/transformers Bloom ``build_alibi_tensor``: ``arange_tensor =
      ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]``, ``alibi = slopes[..., None] *
      arange_tensor``, reshaped to ``(batch * num_heads, 1, seq_length)``;
    * ``"lucidrains"``: lucidrains/x-transformers ``AlibiPositionalBias``: ``bias = -torch.abs(j_arange -
      i_arange)`` times the slopes (bidirectional), here with the causal mask after it.

    ``sign=-1`` reverses the bias (``-slope · j``, or ``+|i - j|``), as a sign slip does: each query then
    favours the farthest keys."""

    def __init__(self, dim: int, heads: int, style: str, sign: int = 1):
        super().__init__()
        self.heads, self.style, self.sign = heads, style, sign
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.register_buffer("slopes", torch.tensor(get_slopes(heads)), persistent=False)

    def bias(self, B: int, T: int):
        H = self.heads
        if self.style == "press":
            alibi = self.slopes.unsqueeze(1).unsqueeze(1) * torch.arange(T).unsqueeze(0).unsqueeze(0).expand(
                H, -1, -1)                                              # (H, 1, T)
            return (self.sign * alibi).unsqueeze(0)                     # (1, H, 1, T)
        if self.style == "bloom":
            attention_mask = torch.ones(B, T)                           # (B, T)
            arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]  # (B, 1, T)
            alibi = self.sign * self.slopes[..., None] * arange_tensor  # (B, H, T)
            return alibi.reshape(B, H, 1, T)                            # (B, H, 1, T)
        i_arange, j_arange = torch.arange(T), torch.arange(T)
        bias = -self.sign * torch.abs(j_arange[None, :] - i_arange[:, None])  # (T, T)
        return bias * self.slopes.view(H, 1, 1)                         # (H, T, T)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)   # (B, H, T, d_k)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)   # (B, H, T, d_k)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)   # (B, H, T, d_k)
        att = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)      # (B, H, T, T)
        att = att + self.bias(B, T)                                     # (B, H, T, T) [alibi]
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T)
        att = att.masked_fill(future, float("-inf"))                    # (B, H, T, T) [future-mask]
        y = att.softmax(dim=-1) @ v                                     # (B, H, T, d_k)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))            # (B, T, C)


class BloomBaddbmmAttention(nn.Module):
    """huggingface/transformers models/bloom/modeling_bloom.py: ``build_alibi_tensor(attention_mask,
    num_heads)`` gives ``alibi`` as ``(batch_size * num_heads, 1, seq_length)`` from the attention mask's
    ``cumsum``, and ``BloomAttention.forward`` adds it to the scores inside one call,
    ``matmul_result = alibi.baddbmm(batch1=query_layer, batch2=key_layer, beta=self.beta,
    alpha=self.inv_norm_factor)``, before ``masked_fill`` with the causal and padding mask. The last
    token of sequence 1 is padding (its cumsum position is 0, off the line). ``sign=-1`` reverses the
    bias (``-slope · j``): each query favours the farthest keys. ``beta=0`` is transformers' GPT-2
    ``_upcast_and_reordered_attn``: ``torch.baddbmm(torch.empty(...), q, k, beta=0, alpha=scale)``, whose
    base is never read."""

    def __init__(self, dim: int, heads: int, sign: int = 1, beta: float = 1.0):
        super().__init__()
        self.heads, self.hd, self.sign, self.beta = heads, dim // heads, sign, beta
        self.query_key_value, self.dense = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.register_buffer("slopes", torch.tensor(get_slopes(heads)), persistent=False)

    def build_alibi_tensor(self, attention_mask):
        batch_size, seq_length = attention_mask.shape
        arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]  # (B, 1, T)
        alibi = self.sign * self.slopes[..., None] * arange_tensor                          # (B, H, T)
        if self.beta == 0:
            return torch.empty(batch_size * self.heads, seq_length, seq_length)             # (B*H, T, T)
        return alibi.reshape(batch_size * self.heads, 1, seq_length)                        # (B*H, 1, T)

    def forward(self, x, attention_mask):
        B, T, _ = x.shape
        H, hd = self.heads, self.hd
        alibi = self.build_alibi_tensor(attention_mask)
        fused = self.query_key_value(x).view(B, T, H, 3, hd)                # (B, T, H, 3, d_k)
        q, k, v = fused[..., 0, :], fused[..., 1, :], fused[..., 2, :]      # (B, T, H, d_k)
        q = q.transpose(1, 2).reshape(B * H, T, hd)                         # (B*H, T, d_k)
        k = k.permute(0, 2, 3, 1).reshape(B * H, hd, T)                     # (B*H, d_k, T)
        v = v.transpose(1, 2).reshape(B * H, T, hd)                         # (B*H, T, d_k)
        scores = alibi.baddbmm(batch1=q, batch2=k, beta=self.beta, alpha=1 / math.sqrt(hd))  # (B*H, T, T) [alibi]
        scores = scores.view(B, H, T, T)                                    # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)                 # (T, T)
        pad = ~attention_mask.bool()[:, None, None, :]                      # (B, 1, 1, T)
        scores = scores.masked_fill(causal | pad, torch.finfo(scores.dtype).min)  # (B, H, T, T) [mask]
        probs = F.softmax(scores, dim=-1).view(B * H, T, T)                 # (B*H, T, T)
        ctx = torch.bmm(probs, v).view(B, H, T, hd).permute(0, 2, 1, 3)     # (B, T, H, d_k)
        return self.dense(ctx.reshape(B, T, H * hd))                        # (B, T, D)


class NanoGPTCausal(nn.Module):
    """karpathy/nanoGPT ``CausalSelfAttention`` (manual path): ``self.bias = torch.tril(torch.ones(n, n))``
    and ``att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))``. ``reversed_=True`` builds the
    buffer with ``torch.triu`` (tril and triu swapped): ``bias == 0`` is then every key before each
    query."""

    def __init__(self, dim: int, heads: int, block_size: int, reversed_: bool = False):
        super().__init__()
        self.heads = heads
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        triangle = torch.triu if reversed_ else torch.tril
        self.register_buffer("bias", triangle(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)   # (B, nh, T, hs)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)   # (B, nh, T, hs)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)   # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))  # (B, nh, T, T) [causal]
        y = att.softmax(dim=-1) @ v                                     # (B, nh, T, hs)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))  # (B, T, C)


def annotated_attention(x, heads: int, reversed_: bool = False):
    """harvardnlp/annotated-transformer: ``subsequent_mask(size)`` is ``torch.triu(torch.ones(attn_shape),
    diagonal=1) == 0`` and ``attention`` fills ``scores.masked_fill(mask == 0, -1e9)``. With
    ``reversed_=True`` the mask is built with ``torch.tril(..., diagonal=-1)``: it keeps the keys on and
    after each query."""
    B, T, D = x.shape
    ones = torch.ones(1, T, T)
    triangle = torch.tril(ones, diagonal=-1) if reversed_ else torch.triu(ones, diagonal=1)  # (1, T, T)
    mask = (triangle == 0).unsqueeze(1)                                 # (1, 1, T, T)
    q = x.view(B, T, heads, D // heads).transpose(1, 2)                 # (B, h, T, d_k)
    scores = q @ q.transpose(-2, -1) / math.sqrt(D // heads)            # (B, h, T, T)
    scores = scores.masked_fill(mask == 0, -1e9)                        # (B, h, T, T) [annotated-mask]
    return scores.softmax(dim=-1) @ q                                   # (B, h, T, d_k)


def sdpa_attention(x, heads: int, mask: str):
    """Masks handed to ``F.scaled_dot_product_attention`` (True attends; a float mask is added):

    * ``"tril"``: the reference implementation in torch's SDPA docs, ``temp_mask = torch.ones(L, S,
      dtype=torch.bool).tril(diagonal=0)``; ``"triu"`` is the same with tril and triu swapped;
    * ``"mpt"``: mosaicml/llm-foundry ``build_alibi_bias``: ``alibi_bias = torch.arange(1 - seq_len, 1)
      .view(1, 1, 1, seq_len)`` times the slopes (``-slope`` per token before the last), passed as
      ``attn_mask`` with the causal part added; ``"mpt-reversed"`` flips its sign."""
    B, T, D = x.shape
    q = x.view(B, T, heads, D // heads).transpose(1, 2)                 # (B, H, T, d_k)
    if mask in ("tril", "triu"):
        ones = torch.ones(T, T, dtype=torch.bool)
        attn_mask = ones.tril(diagonal=0) if mask == "tril" else ones.triu(diagonal=0)  # (T, T)
    else:
        slopes = torch.tensor(get_slopes(heads)).view(1, heads, 1, 1)   # (1, H, 1, 1)
        alibi_bias = torch.arange(1 - T, 1).view(1, 1, 1, T) * slopes   # (1, H, 1, T)
        alibi_bias = -alibi_bias if mask == "mpt-reversed" else alibi_bias
        future = torch.ones(T, T, dtype=torch.bool).triu(1)             # (T, T)
        attn_mask = alibi_bias.masked_fill(future, float("-inf"))       # (1, H, T, T)
    return F.scaled_dot_product_attention(q, q, q, attn_mask=attn_mask)  # (B, H, T, d_k) [sdpa]


def sdpa(dims: str, mask: str):
    B, T, D, H = _sizes(dims)

    def make():
        return (lambda x: sdpa_attention(x, H, mask)), (torch.randn(B, T, D),)
    return make


def _sizes(dims: str) -> tuple[int, int, int, int]:
    sizes = dict(part.split("=") for part in dims.split())
    return tuple(int(sizes[k]) for k in "BTDH")


def alibi(dims: str, style: str, sign: int = 1):
    B, T, D, H = _sizes(dims)

    def make():
        return AlibiAttention(D, H, style, sign).eval(), (torch.randn(B, T, D),)
    return make


def bloom_baddbmm(dims: str, **kwargs):
    B, T, D, H = _sizes(dims)

    def make():
        attention_mask = torch.ones(B, T, dtype=torch.long)                # (B, T)
        attention_mask[1, -1] = 0                                           # sequence 1: its last token pads
        return BloomBaddbmmAttention(D, H, **kwargs).eval(), (torch.randn(B, T, D), attention_mask)
    return make


def nanogpt(dims: str, **kwargs):
    B, T, D, H = _sizes(dims)

    def make():
        return NanoGPTCausal(D, H, block_size=8, **kwargs).eval(), (torch.randn(B, T, D),)
    return make


def annotated(dims: str, **kwargs):
    B, T, D, H = _sizes(dims)

    def make():
        return (lambda x: annotated_attention(x, H, **kwargs)), (torch.randn(B, T, D),)
    return make


CASES = []
for size_id, dims in (("", DIMS), ("-equal-sizes", SQUARE)):
    for style in ("press", "bloom", "lucidrains"):
        CASES += [
            Case(f"alibi-{style}{size_id}", dims, alibi(dims, style), silent=("alibi", "future-mask"),
                 heads={"alibi": ("B", "H", "T", "T"), "future-mask": ("B", "H", "T", "T")}),
            Case(f"alibi-{style}-sign-reversed{size_id}", dims, alibi(dims, style, sign=-1), bug=("alibi",)),
        ]
    CASES += [
        Case("bloom-baddbmm-alibi" + size_id, dims, bloom_baddbmm(dims), silent=("alibi", "mask"),
             names=("B T D", "B T")),
        Case("bloom-baddbmm-alibi-sign-reversed" + size_id, dims, bloom_baddbmm(dims, sign=-1), bug=("alibi",),
             names=("B T D", "B T")),
        Case("gpt2-baddbmm-empty-base-beta-0" + size_id, dims, bloom_baddbmm(dims, beta=0.0), silent=("alibi",),
             names=("B T D", "B T")),
        Case("nanogpt-causal" + size_id, dims, nanogpt(dims), silent=("causal",)),
        Case("nanogpt-causal-tril-triu-swapped" + size_id, dims, nanogpt(dims, reversed_=True), bug=("causal",)),
        Case("annotated-subsequent-mask" + size_id, dims, annotated(dims), silent=("annotated-mask",)),
        Case("annotated-subsequent-mask-reversed" + size_id, dims, annotated(dims, reversed_=True),
             bug=("annotated-mask",)),
        Case("sdpa-docs-tril-mask" + size_id, dims, sdpa(dims, "tril"), silent=("sdpa",)),
        Case("sdpa-docs-mask-triu" + size_id, dims, sdpa(dims, "triu"), bug=("sdpa",)),
        Case("sdpa-mpt-alibi" + size_id, dims, sdpa(dims, "mpt"), silent=("sdpa",)),
        Case("sdpa-mpt-alibi-reversed" + size_id, dims, sdpa(dims, "mpt-reversed"), bug=("sdpa",)),
    ]

test_names, test_verdict = corpus_tests(__name__, CASES)


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_a_reversed_alibi_message_and_verdict(dims):
    from tests.corpus.helpers import trace_case, without_order_caveat
    t = trace_case(Case("x", dims, alibi(dims, "press", sign=-1)))
    found = [d for d in t.diagnostics if d.severity != "note"]
    assert [d.kind for d in found] == ["distance-bias-reversed"]
    e = t.events[found[0].event]
    B, H, T = (t.dims[k] for k in "BHT")
    step = max(get_slopes(H))
    heads = f"H={H}" if H not in (B, T) else H   # the slopes' axis meets the heads (named where sizes differ)
    assert without_order_caveat(found[0].message, B == T) == (
        f"add #{e.index} adds a bias [1, {heads}, 1, T={T}] to the scores [B={B}, H={H}, T={T}, T={T}] that grows with "
        f"the distance to each query along the keys (axis -1, T), linearly and in every head (by up to {step:g} "
        "per token): each query favours the farthest keys, the reverse of ALiBi, which penalises distance.")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_a_reversed_alibi_given_as_baddbmm_base_message_and_verdict(dims):
    """Bloom's ``alibi.baddbmm(q, k)`` adds the bias inside the product (``β · base + α · q @ k``): main
    read only the two matrices and ended ``?`` with no finding. The padded key of sequence 1 is off the
    line in its own rows, which the message counts."""
    from tests.corpus.helpers import trace_case
    t = trace_case(Case("x", dims, bloom_baddbmm(dims, sign=-1), names=("B T D", "B T")))
    found = [d for d in t.diagnostics if d.severity != "note"]
    assert [d.kind for d in found] == ["distance-bias-reversed"]
    e = t.events[found[0].event]
    B, H, T = (t.dims[k] for k in "BHT")
    step = max(get_slopes(H))
    judged = B * H * (T - 2)                                            # queries 2 … T - 1 see three keys or more
    assert found[0].message == (
        f"baddbmm #{e.index} adds a bias [{B * H}, 1, {T}] as its base to the scores [B·H={B * H}, T={T}, T={T}] "
        "that grows with the distance to each query along the keys (axis -1, T), linearly and in every head, "
        f"on {judged - H} of the {judged} query rows that see three keys or more (by up to {step:g} per token): "
        "each query favours the farthest keys, the reverse of ALiBi, which penalises distance.")
    assert t.report().verdict.mark == "✗"


def alibi_along_queries(x, heads: int, along_queries: bool):
    """ofirpress/attention_with_linear_biases (fairseq): ``alibi = slopes.unsqueeze(1).unsqueeze(1) *
    torch.arange(maxpos).unsqueeze(0).unsqueeze(0)``: one value per key position, ``[H, 1, T]``. With
    ``along_queries`` the positions are laid along the queries (``arange(T).unsqueeze(1)``, ``[H, T, 1]``):
    the bias is the same on every key of a query, which softmax takes away."""
    B, T, D = x.shape
    q = x.view(B, T, heads, D // heads).transpose(1, 2)                 # (B, H, T, d_k)
    slopes = torch.tensor(get_slopes(heads))                            # (H,)
    positions = torch.arange(T).unsqueeze(1) if along_queries else torch.arange(T).unsqueeze(0)  # (T, 1) | (1, T)
    alibi = slopes.unsqueeze(1).unsqueeze(1) * positions                # (H, T, 1) | (H, 1, T)
    scores = q @ q.transpose(-2, -1) / math.sqrt(D // heads) + alibi    # (B, H, T, T)
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))  # (B, H, T, T)
    return scores.softmax(dim=-1) @ q                                   # (B, H, T, d_k)


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_a_bias_laid_along_the_queries_is_a_warning_and_along_the_keys_silent(dims):
    B, T, D, H = _sizes(dims)
    found = {}
    for along_queries in (False, True):
        x = torch.randn(B, T, D)
        with shapetrace.trace(dims=dims) as t:
            shapetrace.name(x, "B T D")
            alibi_along_queries(x, H, along_queries)
        found[along_queries] = [d for d in t.diagnostics if d.severity != "note"]
    assert found[False] == []
    [d] = found[True]
    e = t.events[d.event]
    assert (d.kind, d.severity, e.op) == ("bias-constant-along-keys", "warning", "add")
    heads = f"H={H}" if H not in (B, T) else H   # the bias's axis meets the heads (named where sizes differ)
    assert d.message == (
        f"add #{e.index} adds a bias [{heads}, T={T}, 1] to the scores [B={B}, H={H}, T={T}, T={T}] that is the same "
        "on every key each query may see (along axis -1, T) while it changes elsewhere: softmax takes a constant per "
        "query away, so the bias changes no attention weight.")
    assert t.report().verdict.mark != "✓"


def test_a_mask_whose_values_were_not_read_leaves_the_verdict_unproven():
    """On the meta device a mask has no values: its direction is not checked, so no ✓."""
    B, T, D, H = 2, 5, 24, 3
    x = torch.randn(B, T, D, device="meta")
    with shapetrace.trace(dims=DIMS) as t:
        shapetrace.name(x, "B T D")
        q = x.view(B, T, H, D // H).transpose(1, 2)                     # (B, H, T, d_k)
        future = torch.ones(T, T, dtype=torch.bool, device="meta").triu(1)  # (T, T)
        (q @ q.transpose(-2, -1)).masked_fill(future, float("-inf"))     # (B, H, T, T)
    assert [(d.kind, d.severity) for d in t.diagnostics] == [("direction-unchecked", "note")]
    v = t.report().verdict
    assert v.mark == "?"
    assert "not proven: the values of a mask or bias on the scores were not read" in v.line


def gpt2_where_scores(x, heads: int, keep: torch.Tensor, fill_where_true: bool = False):
    """transformers' GPT2Attention._attn: ``torch.where(causal_mask, attn_weights, mask_value)`` with
    ``mask_value = torch.finfo(dtype).min`` as a 0-d tensor; ``fill_where_true`` writes it the other way
    round, ``torch.where(hide, mask_value, attn_weights)``."""
    B, T, D = x.shape
    q = x.view(B, T, heads, D // heads).transpose(1, 2)                 # (B, H, T, d_k)
    scores = q @ q.transpose(-1, -2)                                    # (B, H, T, T)
    fill = torch.full([], torch.finfo(scores.dtype).min, dtype=scores.dtype)
    if fill_where_true:
        return torch.where(~keep, fill, scores)                         # (B, H, T, T)
    return torch.where(keep, scores, fill)                              # (B, H, T, T)


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
@pytest.mark.parametrize("fill_where_true", [False, True])
@pytest.mark.parametrize("reversed_", [False, True])
def test_a_torch_where_mask_is_read_for_its_direction(dims, fill_where_true, reversed_):
    """GPT-2's ``torch.where`` mask was a note saying its values were not read "on another device, too large,
    or the meta device" (all false, on the CPU at T = 5); now it is read like masked_fill: the tril twin is
    silent, the triu one (each query keeps only itself and later keys) is causal-mask-reversed."""
    B, T, D, H = _sizes(dims)
    x = torch.randn(B, T, D)
    ones = torch.ones(T, T, dtype=torch.bool)
    keep = (ones.triu() if reversed_ else ones.tril()).view(1, 1, T, T)  # (1, 1, T, T)
    with shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        gpt2_where_scores(x, H, keep, fill_where_true)
    found = [(d.kind, d.severity) for d in t.diagnostics]
    assert found == ([("causal-mask-reversed", "error")] if reversed_ else [])


def test_a_mask_in_a_form_not_read_says_so_truthfully():
    """A ``torch.where`` whose fill is no large negative (0, which hides nothing) is not read as a mask: the
    note says why, not "on another device, too large, or the meta device" (none of which was true)."""
    B, T, D, H = 2, 5, 24, 3
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=DIMS) as t:
        shapetrace.name(x, "B T D")
        q = x.view(B, T, H, D // H).transpose(1, 2)                     # (B, H, T, d_k)
        keep = torch.ones(T, T, dtype=torch.bool).tril()                # (T, T)
        torch.where(keep, q @ q.transpose(-2, -1), torch.zeros(()))     # (B, H, T, T)
    note = next(d for d in t.diagnostics if d.kind == "direction-unchecked")
    assert "(the direction is read for masked_fill, torch.where with a large negative fill, a mask added to " \
        "the scores and SDPA's attn_mask, not for this op)" in note.message
    assert note.fix == "Write the mask as one of those forms to have it checked."
