"""Linking-ai/SCOPE issue #6 ("Potential Misalignment in decoding_indices Generation"): the decoding-phase
KV compression (the ``h2o-fixed`` metric in ``kv_util.py``) kept the first ``max_capacity_prompt`` cached
tokens, then chose the heavy hitters among the later ones with ``attn_cache[:, :, max_capacity_prompt:]
.topk(k, dim=-1).indices``: indices *relative to that slice*, used as they were in ``key_states[:, :,
:-window_size].gather(dim=2, index=...)`` on the whole cache, so they picked tokens of the prefill range
(already kept) instead of the decoded ones the scores were about. The indices need the slice's start added.

The idiom: one decoding step of a cached attention layer (``(B, H, S, d)`` key/value states of S cached
tokens, the accumulated attention ``attn_cache (B, H, S)`` each cached token received), compressed to the
first ``P`` tokens, the top ``k`` of the middle and the last ``window`` before the new token's query reads
them; indices built ``unsqueeze(-1).expand(..., head_dim)`` and ``cat`` along the tokens, as SCOPE does.
Sizes: S = T cached tokens, P = 2, k = 1, window = 1.

Bug (argument): ``topk-without-offset``: the slice's top-k indices gathered from the whole cache."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("topk-without-offset",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class DecodingKVCompressor:
    def __init__(self, max_capacity_prompt=2, decoding_keep=1, window_size=1, bug=""):
        self.max_capacity_prompt, self.keep = max_capacity_prompt, decoding_keep
        self.window_size, self.bug = window_size, bug

    def update_kv(self, key_states, value_states, attn_cache):                 # (B, H, S, d), (B, H, S)
        bsz, num_heads, _, head_dim = key_states.shape
        p, w = self.max_capacity_prompt, self.window_size
        prefill_indices = torch.arange(p).view(1, 1, p, 1).expand(bsz, num_heads, p, head_dim)
        decoding_indices = attn_cache[:, :, p:-w].topk(self.keep, dim=-1).indices       # (B, H, k)
        if self.bug != "topk-without-offset":
            decoding_indices = decoding_indices + p
        decoding_indices = decoding_indices.unsqueeze(-1).expand(-1, -1, -1, head_dim)
        indices = torch.cat((prefill_indices, decoding_indices), dim=2)        # (B, H, P + k, d)
        k_past = key_states[:, :, :-w, :].gather(dim=2, index=indices)         # [gather]
        v_past = value_states[:, :, :-w, :].gather(dim=2, index=indices)       # [gather]
        k_cur, v_cur = key_states[:, :, -w:, :], value_states[:, :, -w:, :]
        return torch.cat([k_past, k_cur], dim=2), torch.cat([v_past, v_cur], dim=2)   # (B, H, P + k + w, d)


class LlamaDecodeAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.kv_cluster = DecodingKVCompressor(bug=bug)

    def forward(self, hidden_states, past_key, past_value, attn_cache):         # (B, 1, D), (B, H, S, d) x2, (B, H, S)
        b, q_len, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(b, q_len, self.heads, self.head_dim).transpose(1, 2)   # (B, H, 1, d)
        k = self.k_proj(hidden_states).view(b, q_len, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, q_len, self.heads, self.head_dim).transpose(1, 2)
        past_key, past_value = self.kv_cluster.update_kv(past_key, past_value, attn_cache)
        k, v = torch.cat([past_key, k], dim=2), torch.cat([past_value, v], dim=2)  # (B, H, P + k + w + 1, d)
        out = F.scaled_dot_product_attention(q, k, v)                            # (B, H, 1, d)
        return self.o_proj(out.transpose(1, 2).reshape(b, q_len, -1))            # (B, 1, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    d = D // H
    inputs = (torch.randn(B, 1, D), torch.randn(B, H, T, d), torch.randn(B, H, T, d), torch.rand(B, H, T))
    return LlamaDecodeAttention(D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
