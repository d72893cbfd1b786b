"""tanishqkumar/ssd pull request #22 (issue #23, "[Bug] prefix-cache-hit prefill reads wrong KV rows"): in the
nano-vllm style ``Attention.forward``, a prefill batch with a prefix-cache hit replaced the fresh ``k, v`` by the
whole paged caches (``k, v = k_cache, v_cache``) and called ``flash_attn_varlen_func`` with ``cu_seqlens_k``
but without the block table, so each sequence's keys were read as if its blocks lay contiguously from the
cache's first row: the rows of other blocks (another sequence's, or free ones) stood for its cached prefix. The
fix calls ``flash_attn_with_kvcache`` with ``page_table=context.block_tables``.

The idiom (nano-vllm's ``Attention``): ``store_kvcache`` writes the new tokens' keys and values into the paged
caches ``(num_blocks, block_size, H_kv, d)`` at ``slot_mapping``; on a prefix hit the attention reads the
sequences' keys through their blocks; the varlen kernel (written here in torch, one sequence at a time over
``cu_seqlens_q``/``cu_seqlens_k``) runs causal attention aligned to the end of the keys. Each of the ``B``
sequences has ``P`` cached tokens (two blocks, placed out of order in the cache) and ``T`` new ones; ``Qwen3``
-style ``q_proj``/``k_proj``/``v_proj`` and ``o_proj`` around it, tokens packed ``(B * T, D)``.

Bug (argument): ``contiguous-cache-rows``: the sequences' keys read from the flattened cache at
``cu_seqlens_k`` (no block table)."""

import sys

import torch
from torch import nn

BUGS = ("contiguous-cache-rows",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def store_kvcache(key, value, k_cache, v_cache, slot_mapping):
    k_cache.view(-1, *key.shape[1:])[slot_mapping] = key
    v_cache.view(-1, *value.shape[1:])[slot_mapping] = value


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale):
    outs = []
    for i in range(len(cu_seqlens_q) - 1):
        qi = q[cu_seqlens_q[i]:cu_seqlens_q[i + 1]].transpose(0, 1)                       # (H, Lq, d)
        ki = k[cu_seqlens_k[i]:cu_seqlens_k[i + 1]].transpose(0, 1)                       # (H, Lk, d)
        vi = v[cu_seqlens_k[i]:cu_seqlens_k[i + 1]].transpose(0, 1)
        lq, lk = qi.shape[1], ki.shape[1]
        causal = torch.ones(lq, lk, dtype=torch.bool).tril(lk - lq)
        scores = (qi @ ki.transpose(-2, -1) * softmax_scale).masked_fill(~causal, float("-inf"))
        outs.append((scores.softmax(dim=-1) @ vi).transpose(0, 1))
    return torch.cat(outs)


class PagedAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, block_size=4, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.block_size, self.bug = num_heads, hidden_size // num_heads, block_size, bug
        self.scale = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states, k_cache, v_cache, block_tables, slot_mapping, cu_seqlens_q, cu_seqlens_k):
        n = hidden_states.shape[0]
        q = self.q_proj(hidden_states).view(n, self.num_heads, self.head_dim)
        k = self.k_proj(hidden_states).view(n, self.num_heads, self.head_dim)
        v = self.v_proj(hidden_states).view(n, self.num_heads, self.head_dim)
        store_kvcache(k, v, k_cache, v_cache, slot_mapping)
        if self.bug == "contiguous-cache-rows":
            k = k_cache.view(-1, self.num_heads, self.head_dim)                           # [paged]
            v = v_cache.view(-1, self.num_heads, self.head_dim)
        else:
            lens = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).tolist()
            k = torch.cat([k_cache[table].flatten(0, 1)[:n_k] for table, n_k in zip(block_tables, lens)])  # [paged]
            v = torch.cat([v_cache[table].flatten(0, 1)[:n_k] for table, n_k in zip(block_tables, lens)])
        o = flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, self.scale)
        return self.o_proj(o.flatten(1, -1))


class PrefixHitPrefill(nn.Module):
    def __init__(self, D, H, B, P, T, block_size=4, bug=""):
        super().__init__()
        self.attn = PagedAttention(D, H, block_size, bug)
        blocks_per_seq = (P + T + block_size - 1) // block_size
        num_blocks = B * blocks_per_seq + 2
        generator = torch.Generator().manual_seed(1)
        order = torch.randperm(num_blocks, generator=generator)[:B * blocks_per_seq]
        self.block_tables = order.view(B, blocks_per_seq)
        slots = (self.block_tables[:, :, None] * block_size + torch.arange(block_size)).flatten(1)  # (B, slots)
        self.slot_mapping = slots[:, P:P + T].flatten()
        self.cu_seqlens_q = torch.arange(B + 1) * T
        self.cu_seqlens_k = torch.arange(B + 1) * (P + T)
        head_dim = D // H
        self.k_cache = torch.zeros(num_blocks, block_size, H, head_dim)                  # (blocks, bs, H, d)
        self.v_cache = torch.zeros(num_blocks, block_size, H, head_dim)
        prefix_slots = slots[:, :P].flatten()
        self.k_cache.view(-1, H, head_dim)[prefix_slots] = torch.randn(B * P, H, head_dim, generator=generator)
        self.v_cache.view(-1, H, head_dim)[prefix_slots] = torch.randn(B * P, H, head_dim, generator=generator)

    def forward(self, hidden_states):                                                  # (B * T, D), packed
        return self.attn(hidden_states, self.k_cache.clone(), self.v_cache.clone(), self.block_tables,
                         self.slot_mapping, self.cu_seqlens_q, self.cu_seqlens_k)


def build(bug="", B=2, T=6, D=32, H=4, P=8):
    torch.manual_seed(0)
    return PrefixHitPrefill(D, H, B, P, T, bug=bug).eval(), (torch.randn(B * T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
