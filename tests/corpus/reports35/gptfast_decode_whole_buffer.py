"""meta-pytorch/gpt-fast issue #233 ("Incorrect Results with FlexDecoding", 2025): ``KVCache.update()`` returns
the entire cache buffer, ``[B, H_kv, max_seq_length, d]``, uninitialised (zero) slots included, and the flex
decoding path attended all of it: the zero keys score 0 and their zero values take a share of every query's
weights (the report measures a 101% relative error at position 100 of a 2048-slot cache), and the keys past
the step are computed for nothing. gpt-fast's own SDPA path is right because it masks those slots with
``causal_mask[None, None, input_pos]``.

The idiom (gpt-fast's ``model.py``): a fused ``wqkv`` split into ``[H*d, H_kv*d, H_kv*d]``, ``view(B, T, H, d)``,
interleaved rotary from a complex-style table (``reshape(..., -1, 2)``, ``freqs_cis[input_pos]``),
``transpose(1, 2)``, ``k_out[:, :, input_pos] = k_val`` into the cache, GQA by
``repeat_interleave(H // H_kv, dim=1)``, ``scaled_dot_product_attention`` with the boolean mask, heads merged
with ``transpose(1, 2).contiguous().view(B, T, D)`` and ``wo``. Here the caches are passed in, filled for the
prompt's ``P`` positions (gpt-fast keeps them as module buffers), and the step runs at ``input_pos = P..P+T-1``.

Bug (cache read): ``whole-buffer-unmasked``: the decode step attends the whole returned buffer with no mask
for its unwritten slots (the flex path of the report)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("whole-buffer-unmasked",)
TWINS = ()
DIMS = ("B=2 T=1 D=64 H=4 H_kv=2 S=10",)
EQUAL = {DIMS[0]: "B=4 T=4 D=64 H=4 H_kv=2 S=12"}   # (a cache long enough for four steps after the prompt)


def precompute_freqs_cis(seq_len, n_elem, base=10000.0):
    freqs = 1.0 / base ** (torch.arange(0, n_elem, 2)[: n_elem // 2].float() / n_elem)
    freqs = torch.outer(torch.arange(seq_len).float(), freqs)                     # (S, d/2)
    return torch.stack([freqs.cos(), freqs.sin()], dim=-1)                        # (S, d/2, 2)


def apply_rotary_emb(x, freqs_cis):
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)                             # (B, T, H, d/2, 2)
    freqs_cis = freqs_cis.view(1, xshaped.size(1), 1, xshaped.size(3), 2)         # (1, T, 1, d/2, 2)
    x_out2 = torch.stack([
        xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
        xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1],
    ], -1)
    return x_out2.flatten(3).type_as(x)                                           # (B, T, H, d)


class Attention(nn.Module):
    def __init__(self, dim, n_head, n_local_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.n_head, self.n_local_heads, self.head_dim, self.dim = n_head, n_local_heads, dim // n_head, dim
        total_head_dim = (n_head + 2 * n_local_heads) * self.head_dim
        self.wqkv = nn.Linear(dim, total_head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, freqs_cis, mask, input_pos, k_cache, v_cache):
        bsz, seqlen, _ = x.shape
        kv_size = self.n_local_heads * self.head_dim
        q, k, v = self.wqkv(x).split([self.dim, kv_size, kv_size], dim=-1)         # (B, T, H*d), (B, T, H_kv*d)
        q = q.view(bsz, seqlen, self.n_head, self.head_dim)                        # (B, T, H, d)
        k = k.view(bsz, seqlen, self.n_local_heads, self.head_dim)                 # (B, T, H_kv, d)
        v = v.view(bsz, seqlen, self.n_local_heads, self.head_dim)                 # (B, T, H_kv, d)
        q, k = apply_rotary_emb(q, freqs_cis), apply_rotary_emb(k, freqs_cis)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))                           # (B, H, T, d)
        k_out, v_out = k_cache.clone(), v_cache.clone()
        k_out[:, :, input_pos] = k                                                 # (B, H_kv, S, d)
        v_out[:, :, input_pos] = v
        k = k_out.repeat_interleave(self.n_head // self.n_local_heads, dim=1)       # (B, H, S, d)
        v = v_out.repeat_interleave(self.n_head // self.n_local_heads, dim=1)       # (B, H, S, d)
        if self.bug == "whole-buffer-unmasked":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
        y = y.transpose(1, 2).contiguous().view(bsz, seqlen, self.dim)             # (B, T, D)
        return self.wo(y)


class DecodeStep(nn.Module):
    def __init__(self, dim, n_head, n_local_heads, max_seq_length, bug=""):
        super().__init__()
        self.attention = Attention(dim, n_head, n_local_heads, bug=bug)
        self.register_buffer("freqs_cis", precompute_freqs_cis(max_seq_length, dim // n_head))
        self.register_buffer("causal_mask", torch.tril(torch.ones(max_seq_length, max_seq_length, dtype=torch.bool)))

    def forward(self, x, input_pos, k_cache, v_cache):
        mask = self.causal_mask[None, None, input_pos]                              # (1, 1, T, S)
        freqs_cis = self.freqs_cis[input_pos]                                       # (T, d/2, 2)
        return self.attention(x, freqs_cis, mask, input_pos, k_cache, v_cache)


def build(bug="", B=2, T=1, D=64, H=4, H_kv=2, S=10):
    torch.manual_seed(0)
    d, prompt = D // H, S - 2 - T                                                   # (the prompt's filled slots)
    filled = (torch.arange(S) < prompt)[None, None, :, None]
    k_cache = torch.randn(B, H_kv, S, d) * filled
    v_cache = torch.randn(B, H_kv, S, d) * filled
    input_pos = torch.arange(prompt, prompt + T)
    model = DecodeStep(D, H, H_kv, S, bug=bug).eval()
    return model, (torch.randn(B, T, D), input_pos, k_cache, v_cache)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
