"""huggingface/transformers, models/deberta_v2/modeling_deberta_v2.py (``DisentangledSelfAttention``,
``build_relative_position``; https://github.com/huggingface/transformers): heads folded into the batch
by ``transpose_for_scores`` (``view(x.size()[:-1] + (heads, -1)).permute(0, 2, 1, 3).contiguous()
.view(-1, x.size(1), x.size(-1))``: ``(B·H, T, d_k)``); relative positions ``q_ids[:, None] -
k_ids[None, :]`` unsqueezed to ``(1, 1, T, S)``; ``rel_embeddings[0 : att_span * 2, :].unsqueeze(0)``
through the shared ``query_proj``/``key_proj`` and ``repeat(B, 1, 1)``; content-to-position
``c2p_att = torch.bmm(query_layer, pos_key_layer.transpose(-1, -2))`` gathered along the last axis by
``c2p_pos = clamp(relative_pos + att_span, 0, att_span * 2 - 1)``; position-to-content ``p2c_att =
torch.bmm(key_layer, pos_query_layer.transpose(-1, -2))`` gathered by ``p2c_pos = clamp(-r_pos +
att_span, ...)`` and ``.transpose(-1, -2)`` back to (queries, keys); the sum viewed ``(-1, H, T, S)``,
masked with ``masked_fill(~mask, finfo.min)`` (``XSoftmax``), and merged by ``view(-1, H, T, d_k)
.permute(0, 2, 1, 3).contiguous()`` then ``view(B, T, D)``.

Bugs (argument): ``p2c-no-transpose``: the p2c table added as gathered, ``(keys, queries)``, without
``.transpose(-1, -2)`` (square at self-attention, so the shapes agree); ``c2p-with-p2c-index``: the c2p
gather indexed with ``p2c_pos`` (``-relative_pos``): each query reads the embedding of the mirrored
distance (the direction mix-up between c2p and p2c)."""

import sys

import torch
from torch import nn

BUGS = ("p2c-no-transpose", "c2p-with-p2c-index")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build_relative_position(query_size, key_size):
    q_ids = torch.arange(0, query_size)
    k_ids = torch.arange(0, key_size)
    rel_pos_ids = q_ids[:, None] - k_ids[None, :]  # (T, S)
    rel_pos_ids = rel_pos_ids[:query_size, :]
    return rel_pos_ids.unsqueeze(0)  # (1, T, S)


class DisentangledSelfAttention(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, max_relative_positions=4, bug=""):
        super().__init__()
        self.num_attention_heads, self.bug = num_heads, bug
        self.attention_head_size = hidden_size // num_heads
        self.all_head_size = hidden_size
        self.query_proj = nn.Linear(hidden_size, self.all_head_size)
        self.key_proj = nn.Linear(hidden_size, self.all_head_size)
        self.value_proj = nn.Linear(hidden_size, self.all_head_size)
        self.pos_ebd_size = max_relative_positions

    def transpose_for_scores(self, x, attention_heads):
        new_x_shape = x.size()[:-1] + (attention_heads, -1)
        x = x.view(new_x_shape)  # (B, T, H, d_k)
        return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))  # (B·H, T, d_k)

    def forward(self, hidden_states, attention_mask, rel_embeddings):
        query_layer = self.transpose_for_scores(self.query_proj(hidden_states), self.num_attention_heads)
        key_layer = self.transpose_for_scores(self.key_proj(hidden_states), self.num_attention_heads)
        value_layer = self.transpose_for_scores(self.value_proj(hidden_states), self.num_attention_heads)
        scale_factor = 3  # 1 + len(["c2p", "p2c"])
        scale = torch.sqrt(torch.tensor(query_layer.size(-1), dtype=torch.float) * scale_factor)
        attention_scores = torch.bmm(query_layer, key_layer.transpose(-1, -2) / scale.to(dtype=query_layer.dtype))
        relative_pos = build_relative_position(query_layer.size(-2), key_layer.size(-2))
        rel_att = self.disentangled_attention_bias(query_layer, key_layer, relative_pos, rel_embeddings, scale_factor)
        attention_scores = attention_scores + rel_att  # (B·H, T, S)
        attention_scores = attention_scores.view(
            -1, self.num_attention_heads, attention_scores.size(-2), attention_scores.size(-1))  # (B, H, T, S)
        rmask = ~(attention_mask.to(torch.bool))
        attention_probs = attention_scores.masked_fill(rmask, torch.finfo(attention_scores.dtype).min)
        attention_probs = torch.softmax(attention_probs, -1)
        context_layer = torch.bmm(
            attention_probs.view(-1, attention_probs.size(-2), attention_probs.size(-1)), value_layer)
        context_layer = (context_layer.view(-1, self.num_attention_heads, context_layer.size(-2),
                                            context_layer.size(-1)).permute(0, 2, 1, 3).contiguous())  # (B, T, H, d_k)
        new_context_layer_shape = context_layer.size()[:-2] + (-1,)
        return context_layer.view(new_context_layer_shape)  # (B, T, D)

    def disentangled_attention_bias(self, query_layer, key_layer, relative_pos, rel_embeddings, scale_factor):
        relative_pos = relative_pos.unsqueeze(1)  # (1, 1, T, S)
        att_span = self.pos_ebd_size
        rel_embeddings = rel_embeddings[0 : att_span * 2, :].unsqueeze(0)  # (1, 2·span, D)
        pos_query_layer = self.transpose_for_scores(self.query_proj(rel_embeddings), self.num_attention_heads).repeat(
            query_layer.size(0) // self.num_attention_heads, 1, 1)  # (B·H, 2·span, d_k)
        pos_key_layer = self.transpose_for_scores(self.key_proj(rel_embeddings), self.num_attention_heads).repeat(
            query_layer.size(0) // self.num_attention_heads, 1, 1)  # (B·H, 2·span, d_k)
        score = 0
        # content -> position
        scale = torch.sqrt(torch.tensor(pos_key_layer.size(-1), dtype=torch.float) * scale_factor)
        c2p_att = torch.bmm(query_layer, pos_key_layer.transpose(-1, -2))  # (B·H, T, 2·span)
        c2p_pos = torch.clamp(relative_pos + att_span, 0, att_span * 2 - 1)
        r_pos = relative_pos
        p2c_pos = torch.clamp(-r_pos + att_span, 0, att_span * 2 - 1)
        index = p2c_pos if self.bug == "c2p-with-p2c-index" else c2p_pos  # bug: the mirrored distance
        c2p_att = torch.gather(c2p_att, dim=-1, index=index.squeeze(0).expand(
            [query_layer.size(0), query_layer.size(1), relative_pos.size(-1)]))  # (B·H, T, S)
        score += c2p_att / scale.to(dtype=c2p_att.dtype)
        # position -> content
        scale = torch.sqrt(torch.tensor(pos_query_layer.size(-1), dtype=torch.float) * scale_factor)
        p2c_att = torch.bmm(key_layer, pos_query_layer.transpose(-1, -2))  # (B·H, S, 2·span)
        p2c_att = torch.gather(p2c_att, dim=-1, index=p2c_pos.squeeze(0).expand(
            [query_layer.size(0), key_layer.size(-2), key_layer.size(-2)]))  # (B·H, S, T)
        if self.bug != "p2c-no-transpose":
            p2c_att = p2c_att.transpose(-1, -2)  # (B·H, T, S)
        score += p2c_att / scale.to(dtype=p2c_att.dtype)
        return score


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4': hidden states (B, T, D), a padding mask made (B, 1, T, S) the way
    ``get_attention_mask`` does (``mask.unsqueeze(1).unsqueeze(2) * mask.unsqueeze(1).unsqueeze(-1)``),
    and the encoder's ``rel_embeddings.weight`` (2·span, D)."""
    torch.manual_seed(0)
    lengths = torch.tensor([T - i % 2 for i in range(B)])
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()  # (B, T)
    extended = mask.unsqueeze(1).unsqueeze(2)  # (B, 1, 1, T)
    attention_mask = extended * extended.squeeze(-2).unsqueeze(-1)  # (B, 1, T, T)
    rel_embeddings = torch.randn(8, D)
    return DisentangledSelfAttention(D, H, 4, bug).eval(), (torch.randn(B, T, D), attention_mask, rel_embeddings)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
