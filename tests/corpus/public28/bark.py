"""suno-ai/bark, bark/model.py (v0.1.5, ``CausalSelfAttention``, ``Block``, ``GPT``), as ported to
huggingface/transformers, src/transformers/models/bark/modeling_bark.py (v4.46, ``BarkSelfAttention``,
``BarkCausalModel``): the coarse model's input is the semantic history and the coarse tokens, each id shifted into
its own range of one shared vocabulary (``semantic + SEMANTIC_VOCAB``, ``coarse + SEMANTIC_VOCAB + CODEBOOK``),
``wte`` plus a learnt ``wpe`` of ``arange(T)``, then pre-LayerNorm blocks: one fused ``c_attn`` split in three with
``split(D, dim=2)``, ``_split_heads`` (``view(B, T, H, d).permute(0, 2, 1, 3)``), ``q @ k.transpose(-1, -2)`` scaled
by ``1/sqrt(d)``, the causal ``bias`` buffer sliced ``[:, :, :T, :T]`` and filled with ``finfo.min`` where it is 0,
``softmax(dim=-1)``, ``@ v``, ``_merge_heads`` (``transpose(1, 2).contiguous().view(B, T, D)``), ``c_proj``.

Bugs: ``split-heads-no-permute``: ``_split_heads`` as ``reshape(B, H, T, d)`` without the permute (the classic slip
of hand ports, FuxiCTR #30, here in Bark's idiom, with ``reshape`` as ``view``'s error on the ``split`` output
advises); ``softmax-over-queries``: ``softmax(dim=-2)`` (normalising each key's
column over the queries: the natural slip of a port that counts dims from the front with the heads first)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F

SEMANTIC_VOCAB, CODEBOOK = 40, 16


class BarkSelfAttention(nn.Module):
    def __init__(self, dim, heads, block_size, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = dim, heads, bug
        self.head_dim = dim // heads
        self.att_proj = nn.Linear(dim, 3 * dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)
        bias = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.register_buffer("bias", bias.view(1, 1, block_size, block_size), persistent=False)

    def _split_heads(self, tensor):
        if self.bug == "split-heads-no-permute":
            return tensor.reshape(tensor.size(0), self.num_heads, tensor.size(1), self.head_dim)
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)              # (B, H, T, d)

    def _merge_heads(self, tensor):
        tensor = tensor.transpose(1, 2).contiguous()                     # (B, T, H, d)
        return tensor.view(tensor.size()[:-2] + (self.embed_dim,))       # (B, T, D)

    def forward(self, hidden_states):                                    # (B, T, D)
        query, key, value = self.att_proj(hidden_states).split(self.embed_dim, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        query_length, key_length = query.size(-2), key.size(-2)
        attn_weights = (query @ key.transpose(-1, -2)) * (1.0 / self.head_dim ** 0.5)      # (B, H, T, T)
        causal = self.bias[:, :, key_length - query_length:key_length, :key_length]
        attn_weights = attn_weights.masked_fill(causal == 0, torch.finfo(attn_weights.dtype).min)
        attn_weights = F.softmax(attn_weights, dim=-2 if self.bug == "softmax-over-queries" else -1)
        attn_output = attn_weights @ value                               # (B, H, T, d)
        return self.out_proj(self._merge_heads(attn_output))


class BarkBlock(nn.Module):
    def __init__(self, dim, heads, block_size, bug=""):
        super().__init__()
        self.layernorm_1 = nn.LayerNorm(dim, bias=False)
        self.attn = BarkSelfAttention(dim, heads, block_size, bug)
        self.layernorm_2 = nn.LayerNorm(dim, bias=False)
        self.mlp_in, self.mlp_out = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        x = x + self.attn(self.layernorm_1(x))
        return x + self.mlp_out(F.gelu(self.mlp_in(self.layernorm_2(x))))


class BarkCoarseModel(nn.Module):
    def __init__(self, dim, heads, bug="", block_size=32):
        super().__init__()
        self.input_embeds_layer = nn.Embedding(SEMANTIC_VOCAB + 2 * CODEBOOK, dim)
        self.position_embeds_layer = nn.Embedding(block_size, dim)
        self.layers = nn.ModuleList([BarkBlock(dim, heads, block_size, bug)])
        self.layernorm_final = nn.LayerNorm(dim, bias=False)
        self.lm_head = nn.Linear(dim, 2 * CODEBOOK, bias=False)

    def forward(self, semantic, coarse):                                 # (B, T_s), (B, T_c)
        input_ids = torch.cat([semantic, coarse + SEMANTIC_VOCAB], dim=1)   # (B, T)
        seq_length = input_ids.size(-1)
        position_ids = torch.arange(0, seq_length, dtype=torch.long).unsqueeze(0)
        hidden_states = self.input_embeds_layer(input_ids) + self.position_embeds_layer(position_ids)
        for block in self.layers:
            hidden_states = block(hidden_states)
        return self.lm_head(self.layernorm_final(hidden_states))


BUGS = ("split-heads-no-permute", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    semantic = torch.randint(0, SEMANTIC_VOCAB, (B, T // 2))
    coarse = torch.randint(0, 2 * CODEBOOK, (B, T - T // 2))
    return BarkCoarseModel(D, H, bug, block_size=T + 8).eval(), (semantic, coarse)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
