"""shapetrace/engine/rules/cached_chunks.py: several new queries scored with no mask against keys joined onto a
growing KV cache (a prefill run with the cache attached).

Fails on 9203fd5: Mikyx-1/TinyLLM issue #17's prefill without its causal mask
(tests/corpus/reports8/tinyllm_prefill_causal, ``mask-only-without-cache``) was ``✓ checked all 35 ops``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import shapetrace
from tests.corpus.helpers import traced_build
from tests.corpus.reports8 import tinyllm_prefill_causal

DIMS = "B=2 T=6 D=32 H=4"


def _found(t):
    return [(d.severity, d.kind, d.message) for d in t.diagnostics if d.kind == "cached-chunk-unmasked"]


def test_a_prefill_with_the_cache_attached_and_no_mask_is_warned():
    t = traced_build(tinyllm_prefill_causal, "mask-only-without-cache", DIMS)
    [(severity, kind, message)] = _found(t)
    assert (severity, kind) == ("warning", "cached-chunk-unmasked")
    assert message.startswith("softmax #12 weighs 6 new queries against 6 keys with no mask: cat #8 put their own "
                              "keys after 0 cached ones, in a cache that grows from call to call, so each new "
                              "query sees the new tokens after it ([B=2, H=4, T=6, T=6])")
    assert t.report().verdict.line.startswith("! no errors, 1 warning")
    assert _found(traced_build(tinyllm_prefill_causal, "", DIMS)) == []


def _attend(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_fused_kernel_chunk_against_a_cache_without_a_mask_is_warned_and_one_step_is_not():
    torch.manual_seed(0)
    past_k, past_v = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 3, 8), torch.randn(2, 4, 3, 8)
        k0, v0 = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)      # (B, H, 8, d)
        F.scaled_dot_product_attention(q, k0, v0)                                   # a chunk of 3, no mask
        q1, k1, v1 = torch.randn(2, 4, 1, 8), torch.randn(2, 4, 1, 8), torch.randn(2, 4, 1, 8)
        k2, v2 = torch.cat([k0, k1], dim=2), torch.cat([v0, v1], dim=2)           # the cache grows
        F.scaled_dot_product_attention(q1, k2, v2)                                  # one step: nothing to hide
    [(severity, kind, message)] = _found(t)
    assert message.startswith("scaled_dot_product_attention #2 weighs 3 new queries against 8 keys with no mask: "
                              "cat #0 put their own keys after 5 cached ones")


def test_keys_joined_once_are_no_cache():
    """Perceiver's ``kv = cat([x, latents])`` read by the latents: a join that no later join reads first."""
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        x, latents = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 3, 8)
        kv = torch.cat([x, latents], dim=2)                                          # (B, H, 9, d)
        F.scaled_dot_product_attention(latents, kv, kv)
    assert _found(t) == []


def test_blocks_joined_to_global_keys_with_a_bias_added_are_not_an_unmasked_cache():
    """LongT5's transient-global attention (tests/corpus/public22/longt5_tglobal): each block's keys are the three
    blocks around it joined, then the global tokens joined after them (a chain of joins whose last part has as
    many entries as a block has queries, 2 = 2), and the local mask reaches the scores inside the bias added to
    them (``scores + position_bias``, no row of its own). On eea3781: ``! cached-chunk-unmasked`` on correct code."""
    B, nb, w, H, d, G = 2, 4, 2, 4, 8, 2
    q, k = torch.randn(B, nb, w, H, d), torch.randn(B, nb, w, H, d)
    side = torch.randn(B, nb, G, H, d)
    mask = torch.where((torch.arange(3 * w)[None, :] - torch.arange(w, 2 * w)[:, None]).abs() < w, 0.0, -1e10)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=8 D=32 H=4") as t:
        padded = F.pad(k, (0, 0, 0, 0, 0, 0, 1, 1))                                         # (B, nb+2, w, H, d)
        local = torch.cat([padded[:, i:i + nb] for i in range(3)], dim=2)                   # (B, nb, 3w, H, d)
        keys = torch.cat([local, side], dim=2)                                              # (B, nb, 3w+G, H, d)
        scores = torch.einsum("...qhd,...khd->...hqk", q, keys)                             # (B, nb, H, w, 3w+G)
        bias = torch.cat([mask.expand(nb, H, w, 3 * w), torch.randn(nb, H, w, G)], dim=-1)  # (nb, H, w, 3w+G)
        torch.softmax((scores + bias).float(), dim=-1)
    assert _found(t) == []
