"""huggingface/transformers, models/clip/modeling_clip.py (CLIPTextTransformer, CLIPAttention before the
SDPA rewrite): token and position embeddings (``position_ids = arange(T)[None]``), the causal mask of
``_create_4d_causal_attention_mask`` (``full((T, T), min).triu(1)`` expanded to ``[B, 1, T, T]``), the
queries scaled before the product, heads folded into the batch with ``_shape`` and ``view(bsz * H, -1,
d)`` for ``torch.bmm``, and the pooled output read at the end-of-text token (``argmax`` of the ids).

Bugs (argument): ``mask-diagonal``: ``triu(0)``: each token is masked from itself, the first row is all
masked (openai/CLIP model.py builds ``mask.triu_(1)  # zero out the lower diagonal``; the off-by-one is
the classic slip); ``no-transpose``: ``_shape`` as ``view(bsz, H, T, d)`` without the transpose (the
FuxiCTR #30 class, https://github.com/xue-pai/FuxiCTR/issues/30)."""

import sys

import torch
from torch import nn


class CLIPAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.scale = self.head_dim ** -0.5
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def _shape(self, tensor, seq_len, bsz):
        if self.bug == "no-transpose":
            return tensor.view(bsz, self.heads, seq_len, self.head_dim).contiguous()  # bug: (B, T?, H?, d)
        return tensor.view(bsz, seq_len, self.heads, self.head_dim).transpose(1, 2).contiguous()  # (B, H, T, d)

    def forward(self, hidden_states, causal_attention_mask):
        bsz, tgt_len, embed_dim = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scale  # (B, T, D)
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)  # (B, H, T, d)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)  # (B, H, T, d)
        proj_shape = (bsz * self.heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)  # (B*H, T, d)
        key_states = key_states.view(*proj_shape)  # (B*H, T, d)
        value_states = value_states.view(*proj_shape)  # (B*H, T, d)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))  # (B*H, T, T)
        attn_weights = attn_weights.view(bsz, self.heads, tgt_len, src_len) + causal_attention_mask  # (B, H, T, T)
        attn_weights = attn_weights.view(bsz * self.heads, tgt_len, src_len)  # (B*H, T, T)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)  # (B*H, T, d)
        attn_output = attn_output.view(bsz, self.heads, tgt_len, self.head_dim).transpose(1, 2)  # (B, T, H, d)
        attn_output = attn_output.reshape(bsz, tgt_len, embed_dim)  # (B, T, D)
        return self.out_proj(attn_output)


class CLIPTextTransformer(nn.Module):
    def __init__(self, vocab=49, dim=32, heads=4, max_pos=16, bug=""):
        super().__init__()
        self.bug = bug
        self.token_embedding = nn.Embedding(vocab, dim)
        self.position_embedding = nn.Embedding(max_pos, dim)
        self.register_buffer("position_ids", torch.arange(max_pos).expand((1, -1)), persistent=False)
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.self_attn = CLIPAttention(dim, heads, bug)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.final_layer_norm = nn.LayerNorm(dim)

    def causal_mask(self, bsz, seq_len, dtype):
        mask = torch.full((seq_len, seq_len), torch.finfo(dtype).min)  # (T, T)
        mask = mask.triu(0) if self.bug == "mask-diagonal" else mask.triu(1)  # (T, T): keys after the query
        return mask[None, None, :, :].expand(bsz, 1, seq_len, seq_len)  # (B, 1, T, T)

    def forward(self, input_ids):
        bsz, seq_len = input_ids.shape
        position_ids = self.position_ids[:, :seq_len]  # (1, T)
        hidden = self.token_embedding(input_ids) + self.position_embedding(position_ids)  # (B, T, D)
        mask = self.causal_mask(bsz, seq_len, hidden.dtype)
        hidden = hidden + self.self_attn(self.layer_norm1(hidden), mask)
        hidden = hidden + self.mlp(self.layer_norm2(hidden))
        hidden = self.final_layer_norm(hidden)
        eot = input_ids.argmax(dim=-1)  # (B,)
        return hidden[torch.arange(hidden.shape[0]), eot]  # (B, D)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims B=2,T=6,D=32,H=4: ids [B, T]."""
    torch.manual_seed(0)
    return CLIPTextTransformer(dim=D, heads=H, bug=bug).eval(), (torch.randint(0, 48, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
