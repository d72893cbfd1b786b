"""huggingface/transformers, src/transformers/models/granite/modeling_granite.py (v4.45, ``GraniteAttention``,
``GraniteModel``, ``GraniteForCausalLM``): the scores scaled by ``config.attention_multiplier`` in place of
``1 / sqrt(head_dim)`` (``self.scaling = config.attention_multiplier``), the embeddings times
``embedding_multiplier``, each residual branch times ``residual_multiplier``, and the logits divided by
``logits_scaling``; otherwise Llama's attention: grouped key/value heads, ``view(bsz, q_len, -1,
head_dim).transpose(1, 2)``, rotary, ``repeat_kv``, the causal mask, softmax in float32, ``o_proj``.

Bugs (argument): ``mask-diagonal-hidden``: the causal mask built ``torch.triu(full(min), diagonal=0)`` (the
``diagonal=1`` dropped: each token hides itself too, and the first token sees nothing, the slip of many
hand-written causal masks); ``repeat-kv-on-tokens``: ``torch.repeat_interleave(k, n_rep, dim=2)`` after a
``view`` of the keys ``(B, H_kv, T * n_rep, d)`` read back as ``(B, H, T, d)`` (the keys repeated along the
tokens and refolded: heads get other heads' tokens)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep, bug=""):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if bug == "repeat-kv-on-tokens":
        hidden_states = torch.repeat_interleave(hidden_states, n_rep, dim=2)       # (B, H_kv, T*n, d)
        return hidden_states.view(batch, num_key_value_heads * n_rep, slen, head_dim)
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class GraniteAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, attention_multiplier=0.0625, bug=""):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.bug = heads, kv_heads, dim // heads, bug
        self.scaling = attention_multiplier
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, hidden_states, cos, sin, attention_mask):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)   # (B, H, T, d)
        k = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)   # (B, H_kv, T, d)
        v = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, self.heads // self.kv_heads, self.bug)
        v = repeat_kv(v, self.heads // self.kv_heads, self.bug)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scaling           # (B, H, T, T)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()   # (B, T, H, d)
        return self.o_proj(attn_output.view(bsz, q_len, -1))


class GraniteForCausalLM(nn.Module):
    def __init__(self, dim, heads, kv_heads, vocab=32, bug=""):
        super().__init__()
        self.bug = bug
        self.embedding_multiplier, self.residual_multiplier, self.logits_scaling = 12.0, 0.22, 8.0
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.input_layernorm, self.norm = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.self_attn = GraniteAttention(dim, heads, kv_heads, bug=bug)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        head_dim = dim // heads
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim)),
                             persistent=False)

    def causal_mask(self, T, dtype):
        full = torch.full((T, T), torch.finfo(dtype).min, dtype=dtype)
        mask = torch.triu(full, diagonal=0 if self.bug == "mask-diagonal-hidden" else 1)
        return mask[None, None, :, :]                                              # (1, 1, T, T)

    def forward(self, input_ids):                                                  # (B, T)
        B, T = input_ids.shape
        hidden_states = self.embed_tokens(input_ids) * self.embedding_multiplier    # (B, T, D)
        position_ids = torch.arange(T).unsqueeze(0)
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)                  # (1, 1, T, d)
        attn = self.self_attn(self.input_layernorm(hidden_states), cos, sin, self.causal_mask(T, hidden_states.dtype))
        hidden_states = hidden_states + attn * self.residual_multiplier
        logits = self.lm_head(self.norm(hidden_states))
        return logits / self.logits_scaling


BUGS = ("mask-diagonal-hidden", "repeat-kv-on-tokens")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    return GraniteForCausalLM(D, H, H_kv, bug=bug).eval(), (torch.randint(0, 32, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
