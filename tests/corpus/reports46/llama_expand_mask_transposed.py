"""huggingface/transformers pull request #26421 ("Fix attention computation when padding mask is not null", closed
unmerged): for ``LlamaAttention`` with a padding mask the PR proposed two changes to ``modeling_llama.py``'s
``_expand_mask``: ``float("-inf")`` for the fill value, and ``mask[:, None, None, :].expand(bsz, 1, tgt_len,
src_len).transpose(-2, -1)`` ("Transpose the non-casual mask"). The reviewer: "You are transposing target and
source length, so the output mask is no longer ``[bsz, 1, tgt_seq_len, src_seq_len]`` but ``[bsz, 1,
src_seq_len, tgt_seq_len]``". The code as released is right; the PR's transpose moves the padding from the keys'
axis onto the queries': the real tokens then attend the pads, and the pads' own rows are hidden.

The idiom (``modeling_llama.py``, transformers 4.33): ``_make_causal_mask`` (``full((tgt_len, tgt_len),
finfo.min)``, ``masked_fill_(mask_cond < (mask_cond + 1).view(-1, 1), 0)``, ``[None, None]`` expanded to ``(bsz,
1, tgt_len, tgt_len)``), ``_expand_mask`` (``1.0 - expanded``, filled with ``finfo.min``), the two added in
``_prepare_decoder_attention_mask``; ``LlamaRMSNorm``, ``LlamaRotaryEmbedding`` (``cos_cached[:, :, :seq_len]``
picked by ``position_ids``, ``rotate_half``), ``LlamaAttention`` (``q_proj``/``k_proj``/``v_proj`` without bias,
``view(bsz, q_len, H, d).transpose(1, 2)``, ``matmul / sqrt(d)``, ``+ attention_mask``, ``softmax(-1, float32)``,
``transpose(1, 2).reshape(bsz, q_len, hidden)``, ``o_proj``), the SiLU-gated MLP. One decoder layer; the first row
left-padded by two (``position_ids`` from the mask, as ``generate`` makes them).

Bugs (mask): ``mask-transposed``: the PR's ``.transpose(-2, -1)`` (its ``-inf`` left out: with it the pads' rows
are all ``-inf`` and softmax gives NaN); ``mask-not-inverted``: ``expanded.masked_fill(expanded.bool(), min)``
without ``1.0 - expanded`` (the real tokens hidden, the pads kept)."""

import sys

import torch
from torch import nn

BUGS = ("mask-transposed", "mask-not-inverted")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def _make_causal_mask(input_ids_shape, dtype):
    bsz, tgt_len = input_ids_shape
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min)
    mask_cond = torch.arange(mask.size(-1))
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)                   # (B, 1, T, T)


def _expand_mask(mask, dtype, tgt_len=None, bug=""):
    bsz, src_len = mask.size()
    tgt_len = tgt_len if tgt_len is not None else src_len
    expanded_mask = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)  # (B, 1, T, S)
    if bug == "mask-transposed":
        expanded_mask = expanded_mask.transpose(-2, -1)                                # (B, 1, S, T)
    if bug == "mask-not-inverted":
        return expanded_mask.masked_fill(expanded_mask.to(torch.bool), torch.finfo(dtype).min)
    inverted_mask = 1.0 - expanded_mask
    return inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=16, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        freqs = torch.einsum("i,j->ij", torch.arange(max_position_embeddings).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos()[None, None, :, :], persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None, :, :], persistent=False)

    def forward(self, seq_len):
        return self.cos_cached[:, :, :seq_len], self.sin_cached[:, :, :seq_len]


def apply_rotary_pos_emb(q, k, cos, sin, position_ids):
    cos = cos.squeeze(1).squeeze(0)[position_ids].unsqueeze(1)                          # (B, 1, T, d)
    sin = sin.squeeze(1).squeeze(0)[position_ids].unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight, self.variance_epsilon = nn.Parameter(torch.ones(hidden_size)), eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * hidden_states * torch.rsqrt(variance + self.variance_epsilon)


class LlamaAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.hidden_size, self.num_heads, self.head_dim = hidden_size, num_heads, hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, attention_mask, position_ids):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(seq_len=key_states.shape[-2])
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin, position_ids)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / self.head_dim ** 0.5  # (B, H, T, T)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()          # (B, T, H, d)
        return self.o_proj(attn_output.reshape(bsz, q_len, self.hidden_size))          # (B, T, D)


class LlamaModel(nn.Module):
    def __init__(self, vocab, hidden_size, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.embed_tokens = nn.Embedding(vocab, hidden_size)
        self.input_layernorm = LlamaRMSNorm(hidden_size)
        self.self_attn = LlamaAttention(hidden_size, heads)
        self.post_attention_layernorm = LlamaRMSNorm(hidden_size)
        self.gate_proj = nn.Linear(hidden_size, 2 * hidden_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, 2 * hidden_size, bias=False)
        self.down_proj = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.norm = LlamaRMSNorm(hidden_size)

    def _prepare_decoder_attention_mask(self, attention_mask, input_shape, inputs_embeds):
        combined_attention_mask = _make_causal_mask(input_shape, inputs_embeds.dtype)
        expanded_attn_mask = _expand_mask(attention_mask, inputs_embeds.dtype, input_shape[-1], self.bug)
        return expanded_attn_mask + combined_attention_mask                           # (B, 1, T, T)

    def forward(self, input_ids, attention_mask):                                      # (B, T), (B, T)
        inputs_embeds = self.embed_tokens(input_ids)                                   # (B, T, D)
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)             # (B, T)
        mask = self._prepare_decoder_attention_mask(attention_mask, input_ids.shape, inputs_embeds)
        hidden_states = inputs_embeds + self.self_attn(self.input_layernorm(inputs_embeds), mask, position_ids)
        h = self.post_attention_layernorm(hidden_states)
        hidden_states = hidden_states + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))
        return self.norm(hidden_states)                                                # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, :2] = 0                                                          # left padding
    input_ids = torch.randint(1, 50, (B, T)).masked_fill(attention_mask == 0, 0)
    return LlamaModel(50, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
