"""meta-llama/llama, llama/model.py (https://github.com/meta-llama/llama/blob/main/llama/model.py):
``precompute_freqs_cis`` with ``torch.polar``, ``apply_rotary_emb`` through ``view_as_complex`` and
``reshape_for_broadcast``, ``repeat_kv`` as ``x[:, :, :, None, :].expand(...).reshape(...)``, a key/value
cache written ``cache_k[:bsz, start_pos : start_pos + seqlen] = xk`` and read ``cache_k[:bsz, : start_pos +
seqlen]``, and the causal mask ``hstack([zeros((seqlen, start_pos)), triu(full(-inf), 1)])``. The prompt is
fed in two chunks (``start_pos`` 0, then the rest), as llama's chunked prefill does.

Bugs (argument): ``repeat-tiled``: ``repeat_kv`` written ``x.repeat(1, 1, n_rep, 1)``: query head i reads
key/value head ``i % n_kv`` instead of ``i // n_rep`` (the head order apple/axlearn#842 restored,
https://github.com/apple/axlearn/pull/842);
``sdpa-causal``: the manual mask replaced by ``F.scaled_dot_product_attention(..., is_causal=True)`` in
every chunk: torch aligns that mask top-left when L ≠ S, so the second chunk's queries see only the first
keys (https://github.com/pytorch/pytorch/issues/103082, #108108, #144858); ``mask-order``:
``hstack([mask, zeros])``: the cached keys are hidden and future ones shown."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("repeat-tiled", "sdpa-causal", "mask-order")
DIMS = ("B=3 T=6 D=32 H=4 H_kv=2",)


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))  # (d_k/2,)
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)  # (T,)
    freqs = torch.outer(t, freqs).float()  # (T, d_k/2)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64 (T, d_k/2)


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)  # (1, T, 1, d_k/2)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))  # (B, T, H, d_k/2)
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))  # (B, T, H_kv, d_k/2)
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)  # (B, T, H, d_k)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)  # (B, T, H_kv, d_k)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, n_rep, bug=""):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    if bug == "repeat-tiled":
        return x.repeat(1, 1, n_rep, 1)  # bug: (B, S, n_rep·H_kv, d_k), kv heads tiled
    return (
        x[:, :, :, None, :]
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)  # (B, S, H, d_k)
    )


class Attention(nn.Module):
    def __init__(self, dim=32, n_heads=4, n_kv_heads=2, max_batch_size=4, max_seq_len=16, bug=""):
        super().__init__()
        self.n_local_heads, self.n_local_kv_heads, self.bug = n_heads, n_kv_heads, bug
        self.n_rep = n_heads // n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.cache_k = torch.zeros((max_batch_size, max_seq_len, n_kv_heads, self.head_dim))
        self.cache_v = torch.zeros((max_batch_size, max_seq_len, n_kv_heads, self.head_dim))

    def forward(self, x, start_pos, freqs_cis, mask):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)  # (B, T, H, d_k)
        xk = xk.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)  # (B, T, H_kv, d_k)
        xv = xv.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)  # (B, T, H_kv, d_k)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        self.cache_k = self.cache_k.to(xq)
        self.cache_v = self.cache_v.to(xq)
        self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos : start_pos + seqlen] = xv
        keys = self.cache_k[:bsz, : start_pos + seqlen]  # (B, S, H_kv, d_k)
        values = self.cache_v[:bsz, : start_pos + seqlen]  # (B, S, H_kv, d_k)
        keys = repeat_kv(keys, self.n_rep, self.bug)  # (B, S, H, d_k)
        values = repeat_kv(values, self.n_rep, self.bug)  # (B, S, H, d_k)
        xq = xq.transpose(1, 2)  # (B, H, T, d_k)
        keys = keys.transpose(1, 2)  # (B, H, S, d_k)
        values = values.transpose(1, 2)  # (B, H, S, d_k)
        if self.bug == "sdpa-causal":
            output = F.scaled_dot_product_attention(xq, keys, values, is_causal=True)  # bug: top-left when T != S
        else:
            scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)  # (B, H, T, S)
            if mask is not None:
                scores = scores + mask
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            output = torch.matmul(scores, values)  # (B, H, T, d_k)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)  # (B, T, D)
        return self.wo(output)


class Llama(nn.Module):
    """One attention layer driven as ``Transformer.forward`` drives it, over two prompt chunks."""

    def __init__(self, dim=32, n_heads=4, n_kv_heads=2, max_seq_len=16, bug=""):
        super().__init__()
        self.bug = bug
        self.attention = Attention(dim, n_heads, n_kv_heads, max_seq_len=max_seq_len, bug=bug)
        self.freqs_cis = precompute_freqs_cis(dim // n_heads, max_seq_len * 2)

    def step(self, h, start_pos):
        _bsz, seqlen, _ = h.shape
        freqs_cis = self.freqs_cis[start_pos : start_pos + seqlen]  # (T, d_k/2)
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"), device=h.device)
            mask = torch.triu(mask, diagonal=1)  # (T, T)
            if self.bug == "mask-order":
                mask = torch.hstack([mask, torch.zeros((seqlen, start_pos), device=h.device)]).type_as(h)  # bug
            else:
                mask = torch.hstack([torch.zeros((seqlen, start_pos), device=h.device), mask]).type_as(h)  # (T, S)
        return self.attention(h, start_pos, freqs_cis, mask)

    def forward(self, h):
        first = h.shape[1] // 2
        out1 = self.step(h[:, :first], 0)  # (B, T1, D)
        out2 = self.step(h[:, first:], first)  # (B, T2, D)
        return torch.cat([out1, out2], dim=1)  # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4' (H_kv = H/2)."""
    torch.manual_seed(0)
    return Llama(D, H, H // 2, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
