"""facebookresearch/fairseq, fairseq/modules/multihead_attention.py (``MultiheadAttention.forward``,
the eager path; https://github.com/facebookresearch/fairseq): sequence-first ``(tgt_len, bsz,
embed_dim)``; ``q = self.q_proj(query) * self.scaling``; heads folded into the batch by
``q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)``; scores by
``torch.bmm(q, k.transpose(1, 2))``; the ``key_padding_mask`` ``(bsz, src_len)`` applied by viewing the
scores ``(bsz, num_heads, tgt_len, src_len)`` and ``masked_fill(key_padding_mask.unsqueeze(1)
.unsqueeze(2).to(torch.bool), float("-inf"))``, viewed back ``(bsz * num_heads, tgt_len, src_len)``;
``softmax(dim=-1)``; ``attn = torch.bmm(attn_probs, v)``; the merge ``attn.transpose(0, 1)
.contiguous().view(tgt_len, bsz, self.embed_dim)``.

Bugs (argument): ``pad-on-queries``: ``key_padding_mask.unsqueeze(1).unsqueeze(3)``: the key padding laid
on the queries (the easy slip between the query and key axes: padded queries hidden, padded keys read);
``scores-heads-first``: the scores viewed ``(num_heads, bsz, tgt_len, src_len)`` for the mask, while
fairseq's fold is batch-major (row ``b * H + h``): each sequence gets another's padding;
``merge-no-transpose``: ``attn.contiguous().view(tgt_len, bsz, embed_dim)`` without ``transpose(0, 1)``:
rows of ``(bsz * H, tgt_len, d)`` read as tokens. ``scores-heads-first`` raises unless B = H: traced
at B = H = 4 too."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("pad-on-queries", "scores-heads-first", "merge-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4", "B=4 T=6 D=32 H=4")


class MultiheadAttention(nn.Module):
    def __init__(self, embed_dim=32, num_heads=4, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, query, key_padding_mask):
        tgt_len, bsz, embed_dim = query.size()
        q = self.q_proj(query) * self.scaling  # (T, B, D)
        k = self.k_proj(query)
        v = self.v_proj(query)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)  # (B·H, T, d_k)
        k = k.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)  # (B·H, S, d_k)
        v = v.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)  # (B·H, S, d_k)
        src_len = k.size(1)
        attn_weights = torch.bmm(q, k.transpose(1, 2))  # (B·H, T, S)
        if self.bug == "scores-heads-first":
            attn_weights = attn_weights.view(self.num_heads, bsz, tgt_len, src_len)  # bug: fold is b·H + h
        else:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)  # (B, H, T, S)
        if self.bug == "pad-on-queries":
            pad = key_padding_mask.unsqueeze(1).unsqueeze(3).to(torch.bool)  # bug: (B, 1, T, 1)
        else:
            pad = key_padding_mask.unsqueeze(1).unsqueeze(2).to(torch.bool)  # (B, 1, 1, S)
        attn_weights = attn_weights.masked_fill(pad, float("-inf"))
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)  # (B·H, T, S)
        attn_probs = F.softmax(attn_weights, dim=-1)
        attn = torch.bmm(attn_probs, v)  # (B·H, T, d_k)
        if self.bug == "merge-no-transpose":
            attn = attn.contiguous().view(tgt_len, bsz, embed_dim)  # bug: rows are (B·H)
        else:
            attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)  # (T, B, D)
        return self.out_proj(attn)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'T=6 B=2 D=32 H=4': sequence-first input (T, B, D) and a padding mask (B, T), True at pads."""
    torch.manual_seed(0)
    lengths = torch.tensor([T - i % 2 for i in range(B)])
    key_padding_mask = torch.arange(T)[None, :] >= lengths[:, None]  # (B, S)
    return MultiheadAttention(D, H, bug).eval(), (torch.randn(T, B, D), key_padding_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
