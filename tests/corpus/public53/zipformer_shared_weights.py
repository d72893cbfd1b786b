"""k2-fsa/icefall ``egs/librispeech/ASR/zipformer/zipformer.py`` (``RelPositionMultiheadAttentionWeights``,
``SelfAttention``, their use in ``Zipformer2EncoderLayer``; 2023-2024): sequence-first activations ``(seq_len,
batch_size, embed_dim)``; one module computes the attention weights, heads first, ``(num_heads, batch_size,
seq_len, seq_len)``: ``in_proj`` gives queries, keys and a positional query ``p`` per head, ``q.reshape(seq_len,
batch_size, num_heads, query_head_dim).permute(2, 1, 0, 3)``, keys ``permute(2, 1, 3, 0)`` (``(head, batch, d_k,
time2)``), ``attn_scores = torch.matmul(q, k)``; the relative-position scores ``matmul(p, pos_emb)`` over ``2 *
seq_len - 1`` offsets, shifted into ``(time1, time2)`` with the export branch's ``gather`` (``rows = arange(time_len
- 1, -1, -1)``, ``indexes = rows + cols``); ``key_padding_mask`` ``(batch, seq_len)`` laid on the keys with
``masked_fill(key_padding_mask.unsqueeze(1), -1000)``; ``softmax(dim=-1)``. Two ``SelfAttention`` modules (the
layer's ``self_attn1`` and ``self_attn2``) reuse the same weights: ``in_proj`` to ``num_heads * value_head_dim``,
``reshape(seq_len, batch_size, num_heads, -1).permute(2, 1, 0, 3)``, ``matmul(attn_weights, x)``, ``permute(2, 1,
0, 3).contiguous().view(seq_len, batch_size, num_heads * value_head_dim)``, ``out_proj``.

Bugs: ``key-mask-on-queries``: ``key_padding_mask.unsqueeze(-1)`` (``(batch, seq_len, 1)``: the padded frames'
own rows are filled, every real frame still attends the padding); ``out-batch-time-swapped``: ``SelfAttention``'s
way back ``permute(1, 2, 0, 3)`` (``(batch, time, head, d)``) then ``reshape(seq_len, batch_size, -1)`` (the
batch-first result read as sequence-first: frames of different utterances interleaved)."""

import sys

import torch
from torch import nn

BUGS = ("key-mask-on-queries", "out-batch-time-swapped")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
POS_HEAD_DIM = 3


class RelPositionMultiheadAttentionWeights(nn.Module):
    def __init__(self, embed_dim, pos_dim, num_heads, query_head_dim, pos_head_dim, bug=""):
        super().__init__()
        self.num_heads, self.query_head_dim, self.pos_head_dim, self.bug = num_heads, query_head_dim, pos_head_dim, bug
        in_proj_dim = (2 * query_head_dim + pos_head_dim) * num_heads
        self.in_proj = nn.Linear(embed_dim, in_proj_dim)
        self.linear_pos = nn.Linear(pos_dim, num_heads * pos_head_dim, bias=False)

    def forward(self, x, pos_emb, key_padding_mask):
        x = self.in_proj(x)                                                          # (seq, batch, in_proj_dim)
        query_head_dim, pos_head_dim, num_heads = self.query_head_dim, self.pos_head_dim, self.num_heads
        seq_len, batch_size, _ = x.shape
        query_dim = query_head_dim * num_heads
        q = x[..., 0:query_dim]                                                      # (seq, batch, h·d_q)
        k = x[..., query_dim:2 * query_dim]
        p = x[..., 2 * query_dim:]                                                   # (seq, batch, h·d_p)
        q = q.reshape(seq_len, batch_size, num_heads, query_head_dim)                # (seq, batch, h, d_q)
        p = p.reshape(seq_len, batch_size, num_heads, pos_head_dim)
        k = k.reshape(seq_len, batch_size, num_heads, query_head_dim)
        q = q.permute(2, 1, 0, 3)                                                    # (head, batch, time1, d_q)
        p = p.permute(2, 1, 0, 3)                                                    # (head, batch, time1, d_p)
        k = k.permute(2, 1, 3, 0)                                                    # (head, batch, d_q, time2)
        attn_scores = torch.matmul(q, k)                                             # (head, batch, time1, time2)

        pos_emb = self.linear_pos(pos_emb)                                           # (1, 2·seq-1, h·d_p)
        seq_len2 = 2 * seq_len - 1
        pos_emb = pos_emb.reshape(-1, seq_len2, num_heads, pos_head_dim).permute(2, 0, 3, 1)   # (head, 1, d_p, 2·seq-1)
        pos_scores = torch.matmul(p, pos_emb)                                        # (head, batch, time1, 2·seq-1)
        rows = torch.arange(start=seq_len - 1, end=-1, step=-1)                      # (time1,)
        cols = torch.arange(seq_len)                                                 # (time2,)
        rows = rows.repeat(batch_size * num_heads).unsqueeze(-1)                     # (head·batch·time1, 1)
        indexes = rows + cols                                                        # (head·batch·time1, time2)
        pos_scores = pos_scores.reshape(-1, seq_len2)                                # (head·batch·time1, 2·seq-1)
        pos_scores = torch.gather(pos_scores, dim=1, index=indexes)                  # (head·batch·time1, time2)
        pos_scores = pos_scores.reshape(num_heads, batch_size, seq_len, seq_len)     # (head, batch, time1, time2)
        attn_scores = attn_scores + pos_scores

        if self.bug == "key-mask-on-queries":
            attn_scores = attn_scores.masked_fill(key_padding_mask.unsqueeze(-1), -1000)   # (batch, seq, 1)
        else:
            attn_scores = attn_scores.masked_fill(key_padding_mask.unsqueeze(1), -1000)    # (batch, 1, seq)
        return attn_scores.softmax(dim=-1)                                           # (head, batch, time1, time2)


class SelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, value_head_dim, bug=""):
        super().__init__()
        self.bug = bug
        self.in_proj = nn.Linear(embed_dim, num_heads * value_head_dim)
        self.out_proj = nn.Linear(num_heads * value_head_dim, embed_dim)

    def forward(self, x, attn_weights):
        (seq_len, batch_size, embed_dim) = x.shape
        num_heads = attn_weights.shape[0]
        x = self.in_proj(x)                                                          # (seq, batch, h·d_v)
        x = x.reshape(seq_len, batch_size, num_heads, -1).permute(2, 1, 0, 3)        # (head, batch, seq, d_v)
        value_head_dim = x.shape[-1]
        x = torch.matmul(attn_weights, x)                                            # (head, batch, seq, d_v)
        if self.bug == "out-batch-time-swapped":
            x = x.permute(1, 2, 0, 3).reshape(seq_len, batch_size, num_heads * value_head_dim)   # read as (seq, batch)
        else:
            x = x.permute(2, 1, 0, 3).contiguous()                                   # (seq, batch, head, d_v)
            x = x.view(seq_len, batch_size, num_heads * value_head_dim)              # (seq, batch, h·d_v)
        return self.out_proj(x)                                                      # (seq, batch, D)


class Zipformer2EncoderLayerSketch(nn.Module):
    def __init__(self, embed_dim, pos_dim, num_heads, bug=""):
        super().__init__()
        head_dim = embed_dim // num_heads
        self.self_attn_weights = RelPositionMultiheadAttentionWeights(embed_dim, pos_dim, num_heads, head_dim,
                                                                      POS_HEAD_DIM, bug)
        self.self_attn1 = SelfAttention(embed_dim, num_heads, head_dim, bug)
        self.self_attn2 = SelfAttention(embed_dim, num_heads, head_dim, bug)
        self.feed_forward = nn.Linear(embed_dim, embed_dim)

    def forward(self, src, pos_emb, src_key_padding_mask):
        attn_weights = self.self_attn_weights(src, pos_emb, src_key_padding_mask)   # (head, batch, seq, seq)
        src = src + self.self_attn1(src, attn_weights)
        src = src + self.feed_forward(src)
        src = src + self.self_attn2(src, attn_weights)
        return src                                                                   # (seq, batch, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    pos_dim = 48
    lengths = torch.tensor([T] + [T - 2] * (B - 1))
    src_key_padding_mask = torch.arange(T)[None, :] >= lengths[:, None]              # (B, T): True where padded
    inputs = (torch.randn(T, B, D), torch.randn(1, 2 * T - 1, pos_dim), src_key_padding_mask)
    return Zipformer2EncoderLayerSketch(D, pos_dim, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
