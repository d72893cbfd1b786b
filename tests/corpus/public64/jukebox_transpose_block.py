"""openai/jukebox, jukebox/transformer/factored_attention.py (``FactoredAttention`` with ``attn_func=2``:
``factored_qkv``, ``transpose_block_attn``, ``dense_attn``, ``split_heads``, ``merge_heads``, ``_attn``,
``get_mask``, ``_append_cache``) and jukebox/transformer/ops.py (``Conv1D``): the strided ("transpose block") half
of the music prior's factored attention. The context of ``l`` codes is cut into blocks of ``block_ctx``; each code
attends to the codes at the same offset in the earlier blocks: ``q.view(bs, l // block_ctx, block_ctx,
d).transpose(1, 2).contiguous().view(bs * block_ctx, l // block_ctx, d)``, the dense attention over those
``l // block_ctx`` codes with the ``autoregressive`` mask ``ones(q_l, kv_l).tril(kv_l - q_l)`` (``w * mask + -1e9 *
(1 - mask)``), the key split ``permute(0, 2, 3, 1)`` (already transposed for ``matmul(q, k)``), ``1 / sqrt(sqrt(d))``
on both sides, and back ``view(bs, block_ctx, l // block_ctx, d).transpose(1, 2).contiguous().view(bs, l, d)``.
While sampling (``sample=True``) a prompt of ``l`` codes fills the cache (``_append_cache``, ``torch.cat`` on the
time dim) and runs the same path; then one code is sampled: its keys are the cached ones at its own offset,
``k[:, block_l::block_ctx, :]`` with ``block_l = (l - 1) % block_ctx``, and no mask (``q_l == 1``).

Bugs: ``transpose-back-missing``: the way back written ``.view(bs, l, d)`` without the ``transpose(1, 2)`` (the
output of offset ``o`` in block ``b`` lands at token ``o * n_blocks + b``: tokens mixed, the shapes right);
``sample-column-off-by-one``: ``block_l = l % block_ctx`` (the sampled code attends the column of the next offset,
not its own: the keys it reads are one position later in each block)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class Conv1D(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n_in, n_out) * 0.02)
        self.b = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        size_out = (*x.size()[:-1], self.w.size(-1))
        x = torch.addmm(self.b, x.view(-1, x.size(-1)), self.w)                       # (bs·l, n_out)
        return x.view(*size_out)                                                      # (bs, l, n_out)


def get_mask(q_l, kv_l):
    if q_l == 1:
        return None
    offset = max(kv_l - q_l, 0)
    return torch.ones(q_l, kv_l).tril(offset).view(1, 1, q_l, kv_l)


class FactoredAttention(nn.Module):
    def __init__(self, n_in, n_state, n_head, block_ctx, bug=""):
        super().__init__()
        self.n_state, self.n_head, self.block_ctx, self.bug = n_state, n_head, block_ctx, bug
        self.c_attn = Conv1D(n_in, n_state * 3)
        self.c_proj = Conv1D(n_state, n_in)
        self.cache = {}

    def _attn(self, q, k, v):
        scale = 1. / math.sqrt(math.sqrt(self.n_state // self.n_head))
        w = torch.matmul(q * scale, k * scale)                                        # (bs', H, q_l, kv_l)
        mask = get_mask(q.size(-2), k.size(-1))
        if mask is not None:
            w = w * mask + -1e9 * (1 - mask)
        w = F.softmax(w, dim=-1)
        return torch.matmul(w, v)                                                     # (bs', H, q_l, d)

    def split_heads(self, x, k=False):
        x = x.view(*x.size()[:-1], self.n_head, x.size(-1) // self.n_head)            # (bs', l', H, d)
        return x.permute(0, 2, 3, 1) if k else x.permute(0, 2, 1, 3)                  # k: (bs', H, d, l')

    def merge_heads(self, x):
        x = x.permute(0, 2, 1, 3).contiguous()                                        # (bs', l', H, d)
        return x.view(*x.size()[:-2], x.size(-2) * x.size(-1))                        # (bs', l', n_state)

    def dense_attn(self, query, key, value):
        a = self._attn(self.split_heads(query), self.split_heads(key, k=True), self.split_heads(value))
        return self.merge_heads(a)

    def transpose_block_attn(self, q, k, v, sample):
        block_ctx = self.block_ctx
        bs, l, d = v.shape  # noqa: E741
        if sample:
            block_l = l % block_ctx if self.bug == "sample-column-off-by-one" else (l - 1) % block_ctx
            k = k[:, block_l::block_ctx, :]                                           # (bs, l / block_ctx, d)
            v = v[:, block_l::block_ctx, :]
            return self.dense_attn(q, k, v).view(bs, 1, d)
        ql = q.shape[1]
        q = q.view(bs, ql // block_ctx, block_ctx, d).transpose(1, 2).contiguous()   # (bs, block_ctx, nb, d)
        q = q.view(bs * block_ctx, ql // block_ctx, d)                                # (bs·block_ctx, nb, d)
        k = k.view(bs, l // block_ctx, block_ctx, d).transpose(1, 2).contiguous()    # (bs, block_ctx, nb, d)
        k = k.view(bs * block_ctx, l // block_ctx, d)                                 # (bs·block_ctx, nb, d)
        v = v.view(bs, l // block_ctx, block_ctx, d).transpose(1, 2).contiguous()    # (bs, block_ctx, nb, d)
        v = v.view(bs * block_ctx, l // block_ctx, d)                                 # (bs·block_ctx, nb, d)
        a = self.dense_attn(q, k, v)                                                  # (bs·block_ctx, nb, d)
        if self.bug == "transpose-back-missing":
            return a.view(bs, ql, d)
        a = a.view(bs, block_ctx, ql // block_ctx, d).transpose(1, 2).contiguous()   # (bs, nb, block_ctx, d)
        return a.view(bs, ql, d)                                                      # (bs, l, d)

    def _append_cache(self, key, value):
        if "key" in self.cache:
            key = torch.cat([self.cache["key"], key], dim=1)                          # (bs, l + 1, d)
            value = torch.cat([self.cache["value"], value], dim=1)
        self.cache["key"], self.cache["value"] = key, value
        return key, value

    def factored_qkv(self, x, sample):
        curr_ctx = x.shape[1]
        query, key, value = x.chunk(3, dim=2)                                         # (bs, l, n_state)
        if sample:
            key, value = self._append_cache(key, value)
            if curr_ctx > 1:
                sample = False
        return query, key, value, sample

    def forward(self, x, sample=False):
        x = self.c_attn(x)                                                            # (bs, l, 3 n_state)
        query, key, value, sample = self.factored_qkv(x, sample)
        a = self.transpose_block_attn(query, key, value, sample)                     # (bs, l, n_state)
        return self.c_proj(a)


class PriorSampler(nn.Module):
    def __init__(self, width, n_head, block_ctx, bug=""):
        super().__init__()
        self.attn = FactoredAttention(width, width, n_head, block_ctx, bug)

    def forward(self, prompt, step):                                                  # (bs, l, width), (bs, 1, width)
        self.attn.cache = {}
        return self.attn(prompt, sample=True), self.attn(step, sample=True)


BUGS = ("transpose-back-missing", "sample-column-off-by-one")
TWINS = ()
DIMS = ("B=2 T=15 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=15, D=32, H=4):  # noqa: N803
    """A prompt of ``T`` codes' embeddings (blocks of 3 codes, or 2 where ``T`` is no multiple of 3), then one."""
    torch.manual_seed(0)
    block_ctx = 3 if T % 3 == 0 else 2
    return PriorSampler(D, H, block_ctx, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
