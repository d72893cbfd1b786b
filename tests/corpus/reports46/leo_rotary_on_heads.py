"""vukrosic/leo-optimizer pull request #2 ("fix: apply RoPE on the right axis", merged; the same fix in the
repository's other training scripts by pull request #3): ``llm_leo.py``'s ``MultiHeadAttention`` laid q, k, v out
``[B, H, T, D]`` (``qkv.reshape(batch_size, seq_len, 3, n_heads, d_k).permute(2, 0, 3, 1, 4)``) and handed them
straight to ``Rotary``, written for ``x_BTHD``: it cuts its tables ``cos[None, :x.size(-3), None, :]``, so on
head-first q and k it took ``size(-3) = H`` rows and lined them up with the heads ("turns out rotary was indexing
-3 wrong since Q/K came in as [B, H, T, D] ... now cos/sin index the sequence dim (T) instead of heads (H)"):
each head turned by its head index, every token of a head by the same angle, no position at all. The fix
transposes around the call: ``self.rotary(Q.transpose(1, 2)).transpose(1, 2)``.

The idiom (modded-nanogpt's half-truncated rotary, as the repository copied it): ``angular_freq = (1 / 10000) **
linspace(0, 1, steps=dim // 4)`` padded with ``dim // 4`` zeros, ``theta = einsum("i,j -> ij", t, angular_freq)``,
``x1, x2 = x.float().chunk(2, dim=-1)``, ``y1 = x1 * cos + x2 * sin``, ``y2 = x1 * (-sin) + x2 * cos``,
``cat((y1, y2), 3)``; one fused ``qkv`` Linear without bias, ``F.scaled_dot_product_attention(is_causal=True)``,
``transpose(1, 2).reshape(batch_size, seq_len, d_model)``, ``w_o``; pre-norm ``nn.RMSNorm`` block with a SiLU
feed-forward; token embedding, tied ``lm_head``.

Bugs: ``rotary-on-heads`` (the reported code: ``self.rotary(Q)``, ``self.rotary(K)`` on ``[B, H, T, D]``);
``merge-without-transpose``: the attention output ``reshape(batch_size, seq_len, d_model)`` straight from
``[B, H, T, D]``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("rotary-on-heads", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class Rotary(nn.Module):
    def __init__(self, dim, max_seq_len):
        super().__init__()
        angular_freq = (1 / 10000) ** torch.linspace(0, 1, steps=dim // 4, dtype=torch.float32)
        angular_freq = torch.cat([angular_freq, angular_freq.new_zeros(dim // 4)])
        t = torch.arange(max_seq_len, dtype=torch.float32)
        theta = torch.einsum("i,j -> ij", t, angular_freq)                             # (max_seq_len, d_k/2)
        self.register_buffer("cos", theta.cos(), persistent=False)
        self.register_buffer("sin", theta.sin(), persistent=False)

    def forward(self, x_BTHD):
        assert self.cos.size(0) >= x_BTHD.size(-3)
        cos = self.cos[None, :x_BTHD.size(-3), None, :]                                # (1, T, 1, d_k/2)
        sin = self.sin[None, :x_BTHD.size(-3), None, :]
        x1, x2 = x_BTHD.to(dtype=torch.float32).chunk(2, dim=-1)
        y1 = x1 * cos + x2 * sin
        y2 = x1 * (-sin) + x2 * cos
        return torch.cat((y1, y2), 3).type_as(x_BTHD)                                  # (B, T, H, d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len, bug=""):
        super().__init__()
        self.d_model, self.n_heads, self.d_k, self.bug = d_model, n_heads, d_model // n_heads, bug
        self.qkv = nn.Linear(d_model, d_model * 3, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)
        self.rotary = Rotary(self.d_k, max_seq_len)

    def forward(self, x):
        batch_size, seq_len = x.size(0), x.size(1)
        qkv = self.qkv(x).reshape(batch_size, seq_len, 3, self.n_heads, self.d_k)      # (B, T, 3, H, d_k)
        qkv = qkv.permute(2, 0, 3, 1, 4)                                               # (3, B, H, T, d_k)
        Q, K, V = qkv[0], qkv[1], qkv[2]                                               # (B, H, T, d_k)
        if self.bug == "rotary-on-heads":
            Q, K = self.rotary(Q), self.rotary(K)
        else:
            Q = self.rotary(Q.transpose(1, 2)).transpose(1, 2)                         # (B, H, T, d_k)
            K = self.rotary(K.transpose(1, 2)).transpose(1, 2)
        attn_output = F.scaled_dot_product_attention(Q, K, V, is_causal=True)          # (B, H, T, d_k)
        if self.bug == "merge-without-transpose":
            attn_output = attn_output.reshape(batch_size, seq_len, self.d_model)
        else:
            attn_output = attn_output.transpose(1, 2).reshape(batch_size, seq_len, self.d_model)  # (B, T, D)
        return self.w_o(attn_output)


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, max_seq_len, bug=""):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, n_heads, max_seq_len, bug)
        self.linear1 = nn.Linear(d_model, d_ff, bias=False)
        self.linear2 = nn.Linear(d_ff, d_model, bias=False)
        self.norm1, self.norm2 = nn.RMSNorm(d_model), nn.RMSNorm(d_model)

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.linear2(F.silu(self.linear1(self.norm2(x))))


class MinimalLLM(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, max_seq_len=16, bug=""):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.transformer_blocks = nn.ModuleList([TransformerBlock(d_model, n_heads, 4 * d_model, max_seq_len, bug)])
        self.norm = nn.RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight

    def forward(self, x):                                                              # (B, T)
        x = self.token_embedding(x) * self.token_embedding.embedding_dim ** 0.5        # (B, T, D)
        for block in self.transformer_blocks:
            x = block(x)
        return self.lm_head(self.norm(x))                                              # (B, T, V)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MinimalLLM(50, D, H, bug=bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
