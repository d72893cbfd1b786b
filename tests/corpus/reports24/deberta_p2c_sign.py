"""nntrainer/nntrainer pull request #3982 ("[CausalLM] Fix BERT and DeBERTa V2 encoder attention", merged;
Seunghui98: "The p2c branch of ``add_relative_attn_score`` indexed ``pos_query`` with ``clamp(-bucket(q-k) +
att_span)``, copied from HuggingFace's pre-transpose formula. HuggingFace gathers ``key * pos_query^T`` with
``clamp(-r_pos + span)`` and then transposes (q<->k), so the effective index is ``clamp(bucket(q-k) +
att_span)`` (identical to c2p). The missing transpose flipped the sign and corrupted every off-diagonal
score"): DeBERTa-v2's position-to-content term read, for query i and key j, the relative embedding of
``j - i`` instead of ``i - j``: the bias's direction reversed.

The idiom: HuggingFace's ``DisentangledSelfAttention`` (``query_proj``/``key_proj``/``value_proj``, heads by
``view``/``permute``, the shared ``rel_embeddings`` projected by the same ``key_proj``/``query_proj`` into
``pos_key_layer``/``pos_query_layer``, the content-to-position term gathered along the last axis at
``clamp(relative_pos + att_span)``, the position-to-content term gathered on ``key @ pos_query^T`` at
``clamp(-relative_pos + att_span)`` and transposed, scale ``sqrt(d * 3)``, the padding mask). Written in
torch the way the report reads it: the gather's index keeps the c2p sign before the transpose.

Bug (direction): ``p2c-sign-flipped``: the p2c index ``clamp(relative_pos + att_span)`` before the
transpose, so the term reads ``pos_query[j - i]``."""

import math
import sys

import torch
from torch import nn

BUGS = ("p2c-sign-flipped",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class DisentangledSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, att_span=4, bug=""):
        super().__init__()
        self.bug = bug
        self.num_attention_heads, self.attention_head_size = num_heads, hidden_size // num_heads
        self.all_head_size = hidden_size
        self.query_proj = nn.Linear(hidden_size, hidden_size)
        self.key_proj = nn.Linear(hidden_size, hidden_size)
        self.value_proj = nn.Linear(hidden_size, hidden_size)
        self.att_span = att_span
        self.rel_embeddings = nn.Embedding(2 * att_span, hidden_size)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)                                  # (B, H, T, d)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query_proj(hidden_states))
        key_layer = self.transpose_for_scores(self.key_proj(hidden_states))
        value_layer = self.transpose_for_scores(self.value_proj(hidden_states))
        scale = math.sqrt(query_layer.size(-1) * 3)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2) / scale)

        q = hidden_states.size(1)
        ids = torch.arange(q)
        relative_pos = ids[:, None] - ids[None, :]                                      # (T, T): i - j
        rel = self.rel_embeddings.weight.unsqueeze(0)                                   # (1, 2 * span, D)
        pos_key_layer = self.transpose_for_scores(self.key_proj(rel))                  # (1, H, 2 * span, d)
        pos_query_layer = self.transpose_for_scores(self.query_proj(rel))
        span = self.att_span
        # content -> position
        c2p_att = torch.matmul(query_layer, pos_key_layer.transpose(-1, -2))            # (B, H, T, 2 * span)
        c2p_pos = torch.clamp(relative_pos + span, 0, 2 * span - 1)
        c2p_att = torch.gather(c2p_att, dim=-1, index=c2p_pos.expand(
            query_layer.size(0), query_layer.size(1), q, q))
        # position -> content
        p2c_att = torch.matmul(key_layer, (pos_query_layer / scale).transpose(-1, -2))  # (B, H, T_k, 2 * span)
        if self.bug == "p2c-sign-flipped":
            p2c_pos = torch.clamp(relative_pos + span, 0, 2 * span - 1)
        else:
            p2c_pos = torch.clamp(-relative_pos + span, 0, 2 * span - 1)
        p2c_att = torch.gather(p2c_att, dim=-1, index=p2c_pos.expand(
            key_layer.size(0), key_layer.size(1), q, q)).transpose(-1, -2)
        attention_scores = attention_scores + c2p_att / scale + p2c_att

        mask = attention_mask[:, None, None, :].bool()
        attention_scores = attention_scores.masked_fill(~mask, torch.finfo(attention_scores.dtype).min)
        attention_probs = torch.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))   # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[-1, -2:] = 0
    return DisentangledSelfAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
