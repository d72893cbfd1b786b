"""transformers, src/transformers/models/owlvit/modeling_owlvit.py (v4.46, ``OwlViTTextEmbeddings``,
``OwlViTAttention``, ``OwlViTTextTransformer``, ``_build_causal_attention_mask`` via
``_create_4d_causal_attention_mask``, ``_prepare_4d_attention_mask``): OWL-ViT's CLIP-style text tower. Token
and learned position embeddings; the causal mask a ``(T, T)`` ``full(finfo.min)`` with ``triu_(1)``, expanded
to ``(B, 1, T, T)``; the padding mask ``(1 - mask[:, None, None, :]) * finfo.min``; the attention scales the query
projection, ``_shape``s to ``(B, H, T, d)`` and folds ``(B·H, T, d)`` for ``bmm``, adds the causal and the
padding mask on the ``view(B, H, T, S)`` of the scores, ``softmax(dim=-1)``, ``bmm`` with v, ``view(B, H, T,
d).transpose(1, 2).reshape(B, T, D)``, ``out_proj``; the pooled output is the final norm's state at
``input_ids.argmax(-1)`` (the end token has the highest id).

Bugs: ``causal-mask-tril``: the mask's ``triu_(1)`` written ``tril_(-1)`` (the mask blocks the past and lets every
query see the future: the reversed direction of a hand-built causal mask); ``merge-without-transpose``: the
``bmm`` output ``view(B, T, D)``ed straight from ``(B·H, T, d)`` (the slip the BART-family ``_shape`` invites,
heads read as tokens)."""

import sys

import torch
from torch import nn


class OwlViTAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.k_proj, self.v_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, attention_mask, causal_attention_mask):
        bsz, tgt_len, embed_dim = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scale
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states, value_states = key_states.view(*proj_shape), value_states.view(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + causal_attention_mask
        attn_weights = attn_weights + attention_mask
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)
        if self.bug == "merge-without-transpose":
            attn_output = attn_output.view(bsz, tgt_len, embed_dim)
        else:
            attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
            attn_output = attn_output.reshape(bsz, tgt_len, embed_dim)
        return self.out_proj(attn_output)


class OwlViTEncoderLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.self_attn = OwlViTAttention(dim, heads, bug)
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, hidden_states, attention_mask, causal_attention_mask):
        residual = hidden_states
        hidden_states = self.self_attn(self.layer_norm1(hidden_states), attention_mask, causal_attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.fc2(nn.functional.gelu(self.fc1(self.layer_norm2(hidden_states))))
        return residual + hidden_states


class OwlViTTextTransformer(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.token_embedding, self.position_embedding = nn.Embedding(vocab, dim), nn.Embedding(16, dim)
        self.layers = nn.ModuleList([OwlViTEncoderLayer(dim, heads, bug) for _ in range(2)])
        self.final_layer_norm = nn.LayerNorm(dim)

    def causal_mask(self, bsz, seq_len, dtype):
        mask = torch.full((seq_len, seq_len), torch.finfo(dtype).min)
        mask = mask.tril_(-1) if self.bug == "causal-mask-tril" else mask.triu_(1)
        return mask[None, None, :, :].expand(bsz, 1, seq_len, seq_len)

    def forward(self, input_ids, attention_mask):
        bsz, seq_len = input_ids.shape
        position_ids = torch.arange(seq_len).unsqueeze(0)
        hidden_states = self.token_embedding(input_ids) + self.position_embedding(position_ids)
        causal_attention_mask = self.causal_mask(bsz, seq_len, hidden_states.dtype)
        expanded = attention_mask[:, None, None, :].expand(bsz, 1, seq_len, seq_len).to(hidden_states.dtype)
        expanded = (1.0 - expanded).masked_fill((1.0 - expanded).bool(), torch.finfo(hidden_states.dtype).min)
        for layer in self.layers:
            hidden_states = layer(hidden_states, expanded, causal_attention_mask)
        last_hidden_state = self.final_layer_norm(hidden_states)
        pooled = last_hidden_state[torch.arange(bsz), input_ids.to(torch.int).argmax(dim=-1)]
        return last_hidden_state, pooled


BUGS = ("causal-mask-tril", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(1, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    input_ids[:, -1] = 49                                                   # the end token (the highest id)
    input_ids[1, -2], attention_mask[1, -1:] = 49, 0                        # entry 1 ends a token early, padded
    return OwlViTTextTransformer(50, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
