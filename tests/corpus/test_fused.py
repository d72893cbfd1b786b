"""Fused attention kernels and their contracts: ``F.scaled_dot_product_attention`` fed ``[B, T, H, d]``,
``is_causal`` with one query against T keys, boolean masks with nn.MultiheadAttention's polarity,
``enable_gqa`` against repeated heads, ``nn.MultiheadAttention`` given batch-first input; each with
a correct twin that must get no error (issue 21, corpus)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.corpus.helpers import Case, corpus_tests

DIMS = "B=2 T=5 D=24 H=3"            # T != H, d_k = 8
SQUARE = "B=2 T=4 D=32 H=4"          # T == H, d_k = 8
GQA = "B=2 T=5 D=24 H=4 H_kv=2"      # d_k = 6, n_rep = 2


class Projections(nn.Module):
    """q, k, v projections (Llama's ``q_proj``/``k_proj``/``v_proj``), kv heads possibly fewer."""

    def __init__(self, dim: int, heads: int, kv_heads: int | None = None):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads or heads, dim // heads
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)


class SDPALayout(Projections):
    """Llama/nanoGPT-style SDPA attention. With ``transpose=False`` q, k and v are handed to SDPA as
    ``view(B, T, H, d)``, the layout of xformers' ``memory_efficient_attention`` and flash-attn
    ([B, M, H, K], facebookresearch/xformers#841), not SDPA's [B, H, T, d]: SDPA then attends over
    heads, per token. The forgotten transpose of reczoo/FuxiCTR#30, at a fused kernel."""

    def __init__(self, dim: int, heads: int, transpose: bool = True, is_causal: bool = False):
        super().__init__(dim, heads)
        self.transpose, self.is_causal = transpose, is_causal

    def forward(self, x):
        B, T, D = x.shape
        H, d = self.heads, self.head_dim
        q = self.q_proj(x).view(B, T, H, d)                           # (B, T, H, d_k)
        k = self.k_proj(x).view(B, T, H, d)                           # (B, T, H, d_k)
        v = self.v_proj(x).view(B, T, H, d)                           # (B, T, H, d_k)
        if self.transpose:
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, d_k) [layout-qkv]
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.is_causal)  # (B, H, T, d_k) [layout-sdpa]
            y = y.transpose(1, 2).reshape(B, T, D)                    # (B, T, D) [layout-merge]
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.is_causal)  # (B, T, H, d_k)?? [bug-layout-sdpa]
            y = y.reshape(B, T, D)                                    # (B, T, D)
        return self.o_proj(y)


class CausalDecodeStep(Projections):
    """The last token's query against every key, through SDPA. With ``is_causal=True`` torch aligns
    the causal mask top-left: the one query sees key 0 only (google/flax#5591 "is_causal=True during
    decode attends only to key position 0"; pytorch/executorch#21749; open-lm-engine/lm-engine#498
    guards it with ``q.size(1) == k.size(1)``)."""

    def __init__(self, dim: int, heads: int, is_causal: bool):
        super().__init__(dim, heads)
        self.is_causal = is_causal

    def forward(self, x):
        B, T, D = x.shape
        H, d = self.heads, self.head_dim
        last = x[:, -1:]                                              # (B, T[-1:], D)
        q = self.q_proj(last).view(B, 1, H, d).transpose(1, 2)        # (B, H, T[-1:], d_k) [step-q]
        k = self.k_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k) [step-k]
        v = self.v_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k)
        if self.is_causal:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [bug-causal-step]
        else:
            y = F.scaled_dot_product_attention(q, k, v)               # (B, H, T[-1:], d_k) [step-sdpa]
        return self.o_proj(y.transpose(1, 2).reshape(B, 1, D))        # (B, T[-1:], D)


class BoolMaskSDPA(Projections):
    """A boolean mask handed to SDPA. nn.MultiheadAttention reads True as "masked out"; SDPA reads True
    as "may attend" (pytorch/pytorch#170400 and its doc PR #170404). ``mask`` picks:

    * ``"mha-causal"``: ``torch.triu(ones, diagonal=1)``, MHA's causal mask, given as is: each query
      attends only to later keys and never to itself (rasbt/LLMs-from-scratch#1061, fixed in #1062
      by inverting it);
    * ``"sdpa-causal"``: the fix, ``~triu`` (the lower triangle);
    * ``"mha-padding"``: a key padding mask, True at padding, broadcast as ``[B, 1, 1, T]``: every
      query attends only to the padding (huggingface/transformers#38094 inverted a mask the same way);
    * ``"sdpa-padding"``: the fix, True where the key is a real token.
    """

    def __init__(self, dim: int, heads: int, mask: str):
        super().__init__(dim, heads)
        self.mask = mask

    def forward(self, x, padding=None):
        B, T, D = x.shape
        H, d = self.heads, self.head_dim
        q = self.q_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k) [mask-q]
        k = self.k_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k)
        v = self.v_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T): True above the diagonal
        if self.mask == "mha-causal":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=future)  # [bug-mask-polarity]
        elif self.mask == "sdpa-causal":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=~future)  # (B, H, T, d_k) [mask-sdpa]
        elif self.mask == "mha-padding":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=padding[:, None, None, :])  # [bug-mask-polarity]
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=~padding[:, None, None, :])  # [mask-sdpa]
        return self.o_proj(y.transpose(1, 2).reshape(B, T, D))        # (B, T, D)


class TorchMHA(nn.Module):
    """``nn.MultiheadAttention`` with its own polarity (True = masked) for both masks, as its docs
    say: the correct twin of the masks above. ``batch_first=False`` on batch-first input [B, T, D] is
    the bug of om-ai-lab/OmDet#19: MHA reads axis 0 as the sequence, so tokens attend across the batch."""

    def __init__(self, dim: int, heads: int, batch_first: bool = True, masks: bool = True):
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=batch_first)
        self.masks = masks

    def forward(self, x, padding):
        T = x.shape[1]
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T): True = masked
        if not self.masks:
            y, _ = self.mha(x, x, x, need_weights=False)              # [bug-mha-batch-first]
            return y
        y, _ = self.mha(x, x, x, attn_mask=future, key_padding_mask=padding, need_weights=False)  # [mha-out]
        return y


class GroupedQuery(Projections):
    """Grouped-query attention. ``repeat``:

    * ``"enable_gqa"``: k and v keep H_kv heads, SDPA's ``enable_gqa=True`` pairs query head h with
      kv head h // n_rep;
    * ``"repeat_kv"``: meta-llama/llama ``repeat_kv`` (``x[:, :, :, None, :].expand(...).reshape``),
      then plain SDPA: the same pairing;
    * ``"repeat_interleave"``: ``repeat_interleave(n_rep, dim=1)``, the same pairing again;
    * ``"tile"``: ``k.repeat(1, n_rep, 1, 1)``: kv heads tiled [0, 1, 0, 1], so query head h meets kv
      head h % H_kv — the Tile that onnx/onnx#7274 replaced with repeat_interleave.
    """

    def __init__(self, dim: int, heads: int, kv_heads: int, repeat: str):
        super().__init__(dim, heads, kv_heads)
        self.repeat = repeat

    def forward(self, x):
        B, T, D = x.shape
        H, Hkv, d = self.heads, self.kv_heads, self.head_dim
        n_rep = H // Hkv
        q = self.q_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k) [gqa-q]
        k = self.k_proj(x).view(B, T, Hkv, d)                         # (B, T, H_kv, d_k)
        v = self.v_proj(x).view(B, T, Hkv, d)                         # (B, T, H_kv, d_k)
        if self.repeat == "repeat_kv":
            k = k[:, :, :, None, :].expand(B, T, Hkv, n_rep, d).reshape(B, T, H, d)  # (B, T, H, d_k)
            v = v[:, :, :, None, :].expand(B, T, Hkv, n_rep, d).reshape(B, T, H, d)  # (B, T, H, d_k)
        k, v = k.transpose(1, 2), v.transpose(1, 2)                   # (B, H_kv or H, T, d_k) [gqa-kv]
        if self.repeat == "enable_gqa":
            y = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (B, H, T, d_k) [gqa-sdpa]
        elif self.repeat == "repeat_interleave":
            k = k.repeat_interleave(n_rep, dim=1)                     # (B, H, T, d_k) [gqa-k-repeated]
            v = v.repeat_interleave(n_rep, dim=1)                     # (B, H, T, d_k)
            y = F.scaled_dot_product_attention(q, k, v)               # (B, H, T, d_k) [gqa-sdpa]
        elif self.repeat == "tile":
            k = k.repeat(1, n_rep, 1, 1)                              # (B, n_rep*H_kv, T, d_k) [bug-gqa-tile]
            v = v.repeat(1, n_rep, 1, 1)                              # (B, n_rep*H_kv, T, d_k) [bug-gqa-tile]
            y = F.scaled_dot_product_attention(q, k, v)               # [bug-gqa-tile]
        else:
            y = F.scaled_dot_product_attention(q, k, v)               # (B, H, T, d_k) [gqa-sdpa]
        return self.o_proj(y.transpose(1, 2).reshape(B, T, D))        # (B, T, D)


def build(model_class, B: int = 2, T: int = 5, D: int = 24, padded: bool = False, **kwargs):
    def make():
        model = model_class(**kwargs).eval()
        x = torch.randn(B, T, D)
        if not padded:
            return model, (x,)
        padding = torch.zeros(B, T, dtype=torch.bool)                 # (B, T): True = padding (MHA's polarity)
        padding[1, T - 2:] = True
        return model, (x, padding)
    return make


PER_HEAD = ("B", "H", "T", "d_k")
NO_SDPA_CONTRACT = "SDPA's arguments are not checked against its [.., H, T, E] role signature"
NO_MASK_POLARITY = "a boolean attn_mask's polarity is not checked (True means attend for SDPA, masked for MHA)"

CASES = [
    Case("sdpa-bhtd-correct", DIMS, build(SDPALayout, dim=24, heads=3),
         heads={"layout-qkv": PER_HEAD, "layout-sdpa": PER_HEAD, "layout-merge": ("B", "T", "D")}),
    Case("sdpa-fed-bthd-T-neq-H", DIMS, build(SDPALayout, dim=24, heads=3, transpose=False),
         bug=("bug-layout-sdpa",)),
    Case("sdpa-fed-bthd-T-eq-H", SQUARE, build(SDPALayout, T=4, D=32, dim=32, heads=4, transpose=False),
         bug=("bug-layout-sdpa",)),
    Case("sdpa-bhtd-correct-T-eq-H", SQUARE, build(SDPALayout, T=4, D=32, dim=32, heads=4),
         heads={"layout-qkv": PER_HEAD, "layout-sdpa": PER_HEAD, "layout-merge": ("B", "T", "D")}),
    Case("sdpa-is-causal-one-query-T-keys", DIMS, build(CausalDecodeStep, dim=24, heads=3, is_causal=True),
         bug=("bug-causal-step",)),
    Case("sdpa-one-query-T-keys-no-causal", DIMS, build(CausalDecodeStep, dim=24, heads=3, is_causal=False),
         heads={"step-q": ("B", "H", "seq", "d_k"), "step-k": PER_HEAD, "step-sdpa": ("B", "H", "seq", "d_k")}),
    Case("sdpa-is-causal-prefill", DIMS, build(SDPALayout, dim=24, heads=3, is_causal=True),
         heads={"layout-sdpa": PER_HEAD}),
    Case("sdpa-bool-mask-mha-causal-polarity", DIMS, build(BoolMaskSDPA, dim=24, heads=3, mask="mha-causal"),
         bug=("bug-mask-polarity",)),
    Case("sdpa-bool-mask-causal-inverted", DIMS, build(BoolMaskSDPA, dim=24, heads=3, mask="sdpa-causal"),
         heads={"mask-q": PER_HEAD, "mask-sdpa": PER_HEAD}),
    Case("sdpa-bool-mask-mha-padding-polarity", DIMS,
         build(BoolMaskSDPA, padded=True, dim=24, heads=3, mask="mha-padding"),
         bug=("bug-mask-polarity",)),
    Case("sdpa-bool-mask-padding-inverted", DIMS,
         build(BoolMaskSDPA, padded=True, dim=24, heads=3, mask="sdpa-padding"),
         heads={"mask-q": PER_HEAD, "mask-sdpa": PER_HEAD}),
    Case("mha-module-masks-true-means-masked", DIMS, build(TorchMHA, padded=True, dim=24, heads=3),
         heads={"mha-out": ("B", "T", "D")}),
    Case("mha-batch-first-input-without-batch-first", DIMS,
         build(TorchMHA, padded=True, dim=24, heads=3, batch_first=False, masks=False),
         bug=("bug-mha-batch-first",)),
    Case("sdpa-enable-gqa", GQA, build(GroupedQuery, dim=24, heads=4, kv_heads=2, repeat="enable_gqa"),
         heads={"gqa-q": PER_HEAD, "gqa-kv": ("B", "H_kv", "T", "d_k"), "gqa-sdpa": PER_HEAD}),
    Case("llama-repeat-kv-then-sdpa", GQA, build(GroupedQuery, dim=24, heads=4, kv_heads=2, repeat="repeat_kv"),
         heads={"gqa-q": PER_HEAD, "gqa-kv": PER_HEAD, "gqa-sdpa": PER_HEAD}),
    Case("gqa-repeat-interleave-then-sdpa", GQA,
         build(GroupedQuery, dim=24, heads=4, kv_heads=2, repeat="repeat_interleave"),
         heads={"gqa-k-repeated": PER_HEAD, "gqa-sdpa": PER_HEAD}),
    Case("gqa-kv-heads-tiled-with-repeat", GQA, build(GroupedQuery, dim=24, heads=4, kv_heads=2, repeat="tile"),
         bug=("bug-gqa-tile",)),
]


test_names, test_verdict = corpus_tests(__name__, CASES)
