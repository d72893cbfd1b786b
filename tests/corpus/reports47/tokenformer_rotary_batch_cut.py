"""kroggen/tokenformer-minimal issue #1 ('likely a bug in "apply_rotary_pos_emb_torch"', closed; the author: "It
is strange because it works perfectly for me"): ``positional_embeddings.py``'s ``apply_rotary_pos_emb`` kept
GPT-NeoX's cut of the tables, ``cos[offset : q.shape[0] + offset, ...]``, written for NeoX's sequence-first
``[sq, b, np, hn]``, while the minimal port's ``TokenFormerBlock.attention`` hands it batch-first ``[b, s, nh,
rotary_ndims]`` pieces. The reporter: "q is of shape [bsz, seq_len, num_head, hsz_per_head] and cos is of shape
[seq_len, 1, 1, hsz_per_head] ... the result shape of cos is [bsz, 1, 1, hsz_per_head] if bsz < seq_len" (it
raised for them; where bsz <= seq_len it broadcasts): the table is cut to B rows and lined up with the batch,
so every token of entry b is turned by the angle of position b, and at batch size 1 (the README's generation)
by position 0, no rotation at all. Here ``bug=""`` cuts the sequence's rows, ``cos[offset : q.shape[1] +
offset]``, and moves them to the token axis, ``transpose(0, 1)`` (``[1, s, 1, d]``).

The idiom (the port of Haiyang-W/TokenFormer): ``Pattention`` (token-parameter attention: ``inputs @
key_param_tokens.T``, the ``gelu_l2_norm`` normalisation over the parameter tokens, ``@ value_param_tokens``) for
q, k, v and the projection, ``view(b, s, heads, head)``, partial rotary on the first 25% of each head
(``RotaryEmbedding`` caching ``emb.cos()[:, None, None, :]``, ``rotate_half``), ``transpose(1, 2)``, the causal
``triu(..., diagonal=1)`` turned into ``-inf``, ``softmax(dim=-1)``, ``transpose(1, 2).contiguous().view(b, s,
h)``; LayerNorm pre-norms, a Pattention FFN. D = 64, 4 heads of 16 (rotary_ndims = 4), 12 parameter tokens.

Bugs (rotary): ``cut-by-batch`` (the reported cut ``q.shape[0]`` on batch-first pieces); ``rotary-after-transpose``
(the fixed rotary applied after ``transpose(1, 2)``, on head-first ``[b, nh, s, d]``: the table cut to nh rows,
each head turned by its head index)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("cut-by-batch", "rotary-after-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=64 H=4"}


def nonlinear_normalization(inputs, dim=-1):
    nonlinear_outputs = F.gelu(inputs)
    return nonlinear_outputs / torch.norm(nonlinear_outputs, p=2, dim=dim, keepdim=True) * math.sqrt(inputs.shape[dim])


class Pattention(nn.Module):
    def __init__(self, input_channels, output_channels, param_token_num):
        super().__init__()
        self.key_param_tokens = nn.Parameter(torch.randn(param_token_num, input_channels) * 0.2)
        self.value_param_tokens = nn.Parameter(torch.randn(param_token_num, output_channels) * 0.2)

    def forward(self, inputs):
        attn_weights = inputs @ self.key_param_tokens.transpose(-2, -1)                 # [b, s, slots]
        attn_weights = nonlinear_normalization(attn_weights)
        return attn_weights @ self.value_param_tokens                                    # [b, s, h]


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_seq_len, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_seq_len).type_as(inv_freq)
        emb = torch.cat((torch.einsum("i,j->ij", t, inv_freq),) * 2, dim=-1)
        self.register_buffer("cos_cached", emb.cos()[:, None, None, :], persistent=False)  # [max, 1, 1, d]
        self.register_buffer("sin_cached", emb.sin()[:, None, None, :], persistent=False)

    def forward(self, x, seq_len):
        return self.cos_cached[:seq_len, ...], self.sin_cached[:seq_len, ...]


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=x1.ndim - 1)


def apply_rotary_pos_emb(q, k, cos, sin, offset=0, bug=""):
    if bug == "cut-by-batch":
        cos, sin = cos[offset: q.shape[0] + offset, ...], sin[offset: q.shape[0] + offset, ...]
    else:
        cos, sin = cos[offset: q.shape[1] + offset, ...], sin[offset: q.shape[1] + offset, ...]
        cos, sin = cos.transpose(0, 1), sin.transpose(0, 1)                              # [1, s, 1, d]
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class TokenFormerBlock(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, slot_num=12, bug=""):
        super().__init__()
        self.num_attention_heads, self.bug = num_attention_heads, bug
        self.hidden_size_per_attention_head = hidden_size // num_attention_heads
        self.norm1, self.norm2 = nn.LayerNorm(hidden_size), nn.LayerNorm(hidden_size)
        self.query, self.key, self.value, self.proj, self.ffn = (
            Pattention(hidden_size, hidden_size, slot_num) for _ in range(5))
        self.rotary_emb = RotaryEmbedding(int(self.hidden_size_per_attention_head * 0.25), max_seq_len=32)

    def forward(self, x):
        x = x + self.proj(self.attention(*(f(self.norm1(x)) for f in (self.query, self.key, self.value))))
        return x + self.ffn(self.norm2(x))

    def rotate(self, q, k, seq_len):
        rotary_ndims = int(self.hidden_size_per_attention_head * 0.25)
        q_rot, q_pass = q[..., :rotary_ndims], q[..., rotary_ndims:]
        k_rot, k_pass = k[..., :rotary_ndims], k[..., rotary_ndims:]
        cos, sin = self.rotary_emb(q, seq_len=seq_len)
        q_rot, k_rot = apply_rotary_pos_emb(q_rot, k_rot, cos, sin, offset=0, bug=self.bug)
        return torch.cat((q_rot, q_pass), dim=-1), torch.cat((k_rot, k_pass), dim=-1)

    def attention(self, q, k, v):
        b, s, h = q.size()
        q = q.view(b, s, self.num_attention_heads, self.hidden_size_per_attention_head)  # [b, s, nh, hs]
        k = k.view(b, s, self.num_attention_heads, self.hidden_size_per_attention_head)
        v = v.view(b, s, self.num_attention_heads, self.hidden_size_per_attention_head)
        if self.bug != "rotary-after-transpose":
            q, k = self.rotate(q, k, s)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)               # [b, nh, s, hs]
        if self.bug == "rotary-after-transpose":
            q, k = self.rotate(q, k, s)
        causal_mask = torch.triu(torch.ones((1, 1, s, s), dtype=torch.bool), diagonal=1)
        attn_mask = torch.where(causal_mask, float('-inf'), 0.0)
        attn_weights = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(self.hidden_size_per_attention_head))  # [b, nh, s, s]
        attn_weights = F.softmax(attn_weights + attn_mask, dim=-1)
        x = attn_weights @ v                                                             # [b, nh, s, hs]
        return x.transpose(1, 2).contiguous().view(b, s, h)                              # [b, s, h]


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return TokenFormerBlock(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
