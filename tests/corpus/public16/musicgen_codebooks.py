"""huggingface/transformers, src/transformers/models/musicgen/modeling_musicgen.py (v4.31, ``MusicgenDecoder``,
``MusicgenAttention``, ``MusicgenForCausalLM``): the codes come flattened ``(B * K, T)`` and are regrouped
``input_ids.reshape(-1, num_codebooks, seq_len)``; the embeddings are summed over the K codebooks
(``inputs_embeds = sum([self.embed_tokens[codebook](input[:, codebook]) for codebook in
range(num_codebooks)])``), sinusoidal positions added; the attention is Bart's (``q_proj(x) * scaling``,
``_shape``: ``view(bsz, seq_len, num_heads, head_dim).transpose(1, 2)``, flattened to ``(bsz * num_heads, T, d)``,
``torch.bmm``), with the causal mask ``(bsz, 1, T, T)`` added to the weights viewed ``(bsz, num_heads, T, T)``;
``out_proj``; the K ``lm_heads`` stacked ``torch.stack([head(hidden_states) for head in self.lm_heads], dim=1)``
(``(B, K, T, V)``).

Bugs (argument): ``codebook-on-time-axis``: ``self.embed_tokens[codebook](input[:, :, codebook])`` (each
codebook's embedding read at one time step across the codebooks: the sequence the decoder sees is K long, the
slip of a port that keeps codes ``(B, T, K)`` as EnCodec's tokenizer returns them but indexes them as ``(B, K,
T)``); ``shape-heads-first``: ``_shape`` written ``view(bsz, num_heads, seq_len, head_dim)`` (no transpose)."""

import math
import sys

import torch
from torch import nn


class MusicgenSinusoidalPositionalEmbedding(nn.Module):
    def __init__(self, embedding_dim):
        super().__init__()
        self.embedding_dim = embedding_dim

    def forward(self, input_ids):                                                  # (B, K, T)
        seq_len = input_ids.shape[-1]
        half_dim = self.embedding_dim // 2
        emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -(math.log(10000) / (half_dim - 1)))
        emb = torch.arange(seq_len, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)     # (T, D/2)
        return torch.cat([torch.cos(emb), torch.sin(emb)], dim=1)                  # (T, D)


class MusicgenAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim, self.bug = embed_dim, num_heads, embed_dim // num_heads, bug
        self.scaling = self.head_dim**-0.5
        self.k_proj, self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False), nn.Linear(embed_dim, embed_dim,
                                                                                          bias=False)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False), nn.Linear(embed_dim, embed_dim,
                                                                                            bias=False)

    def _shape(self, tensor, seq_len, bsz):
        if self.bug == "shape-heads-first":
            return tensor.view(bsz, self.num_heads, seq_len, self.head_dim).contiguous()
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, attention_mask):                              # (B, T, D), (B, 1, T, T)
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)  # (B*H, T, d)
        key_states = key_states.reshape(*proj_shape)
        value_states = value_states.reshape(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))        # (B*H, T, T)
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)                        # (B*H, T, d)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(attn_output)


class MusicgenForCausalLM(nn.Module):
    def __init__(self, dim, heads, num_codebooks, vocab_size=16, bug=""):
        super().__init__()
        self.num_codebooks, self.bug = num_codebooks, bug
        self.embed_tokens = nn.ModuleList([nn.Embedding(vocab_size + 1, dim) for _ in range(num_codebooks)])
        self.embed_positions = MusicgenSinusoidalPositionalEmbedding(dim)
        self.self_attn_layer_norm, self.layer_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.self_attn = MusicgenAttention(dim, heads, bug)
        self.lm_heads = nn.ModuleList([nn.Linear(dim, vocab_size, bias=False) for _ in range(num_codebooks)])

    def forward(self, input_ids):                                                  # (B*K, T)
        input = input_ids.reshape(-1, self.num_codebooks, input_ids.shape[-1])     # (B, K, T)
        if self.bug == "codebook-on-time-axis":
            inputs_embeds = sum([self.embed_tokens[c](input[:, :, c]) for c in range(self.num_codebooks)])
        else:
            inputs_embeds = sum([self.embed_tokens[c](input[:, c]) for c in range(self.num_codebooks)])
        bsz, seq_len, _ = inputs_embeds.shape                                      # (B, T, D)
        hidden_states = inputs_embeds + self.embed_positions(input)[:seq_len]
        hidden = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1)
        mask = torch.zeros(seq_len, seq_len).masked_fill(hidden, torch.finfo(torch.float32).min)
        mask = mask[None, None].expand(bsz, 1, seq_len, seq_len)
        residual = hidden_states
        hidden_states = residual + self.self_attn(self.self_attn_layer_norm(hidden_states), mask)
        hidden_states = self.layer_norm(hidden_states)
        return torch.stack([head(hidden_states) for head in self.lm_heads], dim=1)  # (B, K, T, V)


BUGS = ("codebook-on-time-axis", "shape-heads-first")
TWINS = ()
DIMS = ("B=2 K=3 T=5 D=32 H=4",)


def build(bug="", B=2, K=3, T=5, D=32, H=4):
    torch.manual_seed(0)
    codes = torch.randint(0, 16, (B * K, T))
    return MusicgenForCausalLM(D, H, K, bug=bug).eval(), (codes,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
