"""mlwithme/TransformerTranslation issues #2 ("MyMultiheadAttention 中的 padding 操作") and #6 ("key_padding_mask
处理bug？"): two readers of ``MyTransformer.py``'s ``multi_head_attention_forward`` (a from-scratch copy of
PyTorch's ``F.multi_head_attention_forward`` for a teaching translation model) asked whether
``attn_output_weights.masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2), float('-inf'))`` should read ``...
== False`` (#2) or ``... == 0`` (#6). The author answered in #2 that the code is right: the mask is built as
``(src == self.PAD_IDX).transpose(0, 1)``, True at the padding, and ``masked_fill`` fills where it is True; ``==
False`` is only right for a mask built with ``!=``. Both issues were closed. The proposed change is the bug here.

The idiom (sequence-first, as ``nn.MultiheadAttention``): ``q_proj``/``k_proj``/``v_proj``, ``q * scaling``,
``q.contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)`` (rows batch-major: ``b * H + h``),
``bmm(q, k.transpose(1, 2))``, the padding mask on a ``view(bsz, num_heads, tgt_len, src_len)`` of the scores,
``softmax(dim=-1)``, ``bmm`` with the values, ``attn_output.transpose(0, 1).contiguous().view(tgt_len, bsz,
embed_dim)``, ``out_proj``; the encoder layer (post-norm, ReLU feed-forward) over token embeddings scaled by
``sqrt(d_model)`` plus the sinusoidal table; both sentences right-padded.

Bugs: ``padding-polarity``: ``masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2) == False, ...)`` (the
issues' proposal: every real token hidden, only the pads attended); ``merge-without-transpose``: ``attn_output
.contiguous().view(tgt_len, bsz, embed_dim)`` straight from ``(bsz * num_heads, tgt_len, head_dim)``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("padding-polarity", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}
PAD_IDX = 1


def multi_head_attention_forward(query, key, value, num_heads, out_proj, key_padding_mask=None,
                                 q_proj=None, k_proj=None, v_proj=None, bug=""):
    q, k, v = q_proj(query), k_proj(key), v_proj(value)                            # [tgt_len, batch_size, embed_dim]
    tgt_len, bsz, embed_dim = query.size()
    src_len = key.size(0)
    head_dim = embed_dim // num_heads
    q = q * float(head_dim) ** -0.5
    q = q.contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)   # [bsz * num_heads, tgt_len, d]
    k = k.contiguous().view(-1, bsz * num_heads, head_dim).transpose(0, 1)        # [bsz * num_heads, src_len, d]
    v = v.contiguous().view(-1, bsz * num_heads, head_dim).transpose(0, 1)
    attn_output_weights = torch.bmm(q, k.transpose(1, 2))                          # [bsz * num_heads, tgt, src]
    if key_padding_mask is not None:
        attn_output_weights = attn_output_weights.view(bsz, num_heads, tgt_len, src_len)
        pad = key_padding_mask.unsqueeze(1).unsqueeze(2)                           # [bsz, 1, 1, src_len]
        if bug == "padding-polarity":
            pad = pad == False  # noqa: E712
        attn_output_weights = attn_output_weights.masked_fill(pad, float('-inf'))
        attn_output_weights = attn_output_weights.view(bsz * num_heads, tgt_len, src_len)
    attn_output_weights = F.softmax(attn_output_weights, dim=-1)
    attn_output = torch.bmm(attn_output_weights, v)                                # [bsz * num_heads, tgt_len, d]
    if bug == "merge-without-transpose":
        attn_output = attn_output.contiguous().view(tgt_len, bsz, embed_dim)
    else:
        attn_output = attn_output.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
    return out_proj(attn_output)                                                   # [tgt_len, batch_size, embed_dim]


class MyMultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.q_proj, self.k_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.v_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

    def forward(self, query, key, value, key_padding_mask=None):
        return multi_head_attention_forward(query, key, value, self.num_heads, self.out_proj, key_padding_mask,
                                            self.q_proj, self.k_proj, self.v_proj, self.bug)


class MyTransformerEncoder(nn.Module):
    def __init__(self, vocab_size, d_model, nhead, bug=""):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        position = torch.arange(0, 64, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe = torch.zeros(64, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(1))                                # [max_len, 1, d_model]
        self.self_attn = MyMultiheadAttention(d_model, nhead, bug)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.linear1, self.linear2 = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def forward(self, src):                                                        # [src_len, batch_size]
        src_key_padding_mask = (src == PAD_IDX).transpose(0, 1)                    # [batch_size, src_len]
        x = self.embedding(src) * math.sqrt(self.d_model) + self.pe[:src.size(0)]  # [src_len, batch_size, d_model]
        x = self.norm1(x + self.self_attn(x, x, x, key_padding_mask=src_key_padding_mask))
        return self.norm2(x + self.linear2(F.relu(self.linear1(x))))


def build(bug="", B=2, T=6, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    src = torch.randint(2, 50, (T, B))
    lengths = [T - 2 - (i % 2) for i in range(B)]
    for b, n in enumerate(lengths):
        src[n:, b] = PAD_IDX                                                       # right padding
    return MyTransformerEncoder(50, D, H, bug).eval(), (src,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
