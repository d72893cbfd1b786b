"""google-deepmind/gemma pull request #765 ("Fix Gemma 3/3n KV cache to honor per-batch end_index"): Gemma 3's
``Attention`` wrote each decode step's keys and values into the cache with
``jax.lax.dynamic_update_slice(cache['k'], key_proj, (0, end_index[0] % cache_size, 0, 0))``, one offset for the
whole batch, so "every batch row was written at the same offset whenever fill lengths diverged": a row whose
prompt was longer overwrote one of its own earlier keys and then attended, under its own mask, to a slot that
was never written. The PR ports Gemma 4's per-example scatter (``batch_indices`` and ``end_index % cache_size``
per row) and tests divergent ``end_index = [1, 4]``.

The idiom (gemma/gm/nn/_modules.py, written here in torch for one decode step): ``q_einsum('BTD,NDH->BTNH')``,
``kv_einsum('BSD,CKDH->CBSKH')`` with ``K`` key/value heads, queries scaled by ``query_pre_attn_scalar ** -0.5``,
the grouped product ``einsum('BTKGH,BSKH->BTKGS')`` on queries reshaped ``(B, T, K, G, H)``, the logits reshaped
``(B, T, N, S)``, the soft cap ``tanh(logits / cap) * cap``, ``where(attn_mask[:, :, None, :], logits, K_MASK)``,
``softmax`` over the cache slots, ``einsum('BTNS,BSNH->BTNH')`` with the values repeated per group, and
``attn_vec_einsum('BTNH,NHD->BTD')``. The cache ``(B, S, K, H)`` and the per-row ``end_index`` come in as inputs;
the mask lets each row's token see its cache up to and including the slot it writes. Rotary embeddings are left
out (they read the same ``end_index``; the PR does not touch them).

Bug (cache index): ``shared-end-index``: every row written at ``end_index[0]``."""

import sys

import torch
from torch import nn

BUGS = ("shared-end-index",)
TWINS = ()
DIMS = ("B=2 S=8 D=32 H=4",)
EQUAL = {"B=2 S=8 D=32 H=4": "B=4 S=4 D=32 H=4"}
K_MASK, CAP = -2.3819763e38, 50.0


class Attention(nn.Module):
    def __init__(self, features, num_heads, num_kv_heads, head_dim, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.q_einsum = nn.Parameter(torch.randn(num_heads, features, head_dim) * features ** -0.5)
        self.kv_einsum = nn.Parameter(torch.randn(2, num_kv_heads, features, head_dim) * features ** -0.5)
        self.attn_vec_einsum = nn.Parameter(torch.randn(num_heads, head_dim, features) * features ** -0.5)
        self.query_pre_attn_scalar = head_dim ** -0.5

    def forward(self, x, cache_k, cache_v, end_index):                         # x: (B, T, D)
        query_proj = torch.einsum("BTD,NDH->BTNH", x, self.q_einsum)            # (B, T, N, H)
        key_proj, value_proj = torch.einsum("BSD,CKDH->CBSKH", x, self.kv_einsum)  # (B, T, K, H) each
        query_proj = query_proj * self.query_pre_attn_scalar
        b, t, n, h = query_proj.shape
        cache_size = cache_k.shape[1]
        k_cache, v_cache = cache_k.clone(), cache_v.clone()                     # (B, S, K, H)
        if self.bug == "shared-end-index":
            slot = int(end_index[0]) % cache_size
            k_cache[:, slot:slot + t] = key_proj
            v_cache[:, slot:slot + t] = value_proj
        else:
            batch_indices = torch.arange(b)
            slots = end_index % cache_size
            k_cache[batch_indices, slots] = key_proj[:, 0]
            v_cache[batch_indices, slots] = value_proj[:, 0]
        attn_mask = torch.arange(cache_size)[None, :] <= end_index[:, None]     # (B, S)
        attn_mask = attn_mask[:, None, :]                                       # (B, T, S)
        kg = self.num_kv_heads
        query_proj = query_proj.reshape(b, t, kg, n // kg, h)                   # (B, T, K, G, H)
        logits = torch.einsum("BTKGH,BSKH->BTKGS", query_proj, k_cache)         # (B, T, K, G, S)
        logits = logits.reshape(b, t, n, cache_size)                            # (B, T, N, S)
        logits = torch.tanh(logits / CAP) * CAP
        padded_logits = torch.where(attn_mask[:, :, None, :], logits, K_MASK)
        probs = torch.softmax(padded_logits, dim=-1)
        probs = probs.reshape(b, t, kg, n // kg, cache_size)                    # (B, T, K, G, S)
        encoded = torch.einsum("BTKGS,BSKH->BTKGH", probs, v_cache)             # (B, T, K, G, H)
        encoded = encoded.reshape(b, t, n, h)                                   # (B, T, N, H)
        return torch.einsum("BTNH,NHD->BTD", encoded, self.attn_vec_einsum)     # (B, T, D)


def build(bug="", B=2, S=8, D=32, H=4):
    torch.manual_seed(0)
    head_dim, kv_heads = D // H, H // 2
    model = Attention(D, H, kv_heads, head_dim, bug=bug).eval()
    end_index = torch.tensor([(S // 2 - 1 + 2 * i) % S for i in range(B)])      # divergent fill lengths
    filled = torch.arange(S)[None, :] < end_index[:, None]                      # (B, S)
    cache_k = torch.randn(B, S, kv_heads, head_dim) * filled[:, :, None, None]
    cache_v = torch.randn(B, S, kv_heads, head_dim) * filled[:, :, None, None]
    return model, (torch.randn(B, 1, D), cache_k, cache_v, end_index)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
