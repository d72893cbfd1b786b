"""huggingface/transformers issue #39389 ("Gemma3 bidirectional mask for image tokens isn't reaching attention
forward"): after PRs #38080 and #38295 built Gemma 3's bidirectional mask for the tokens of an image, the mask
handed to the attention at prefill was still "purely causal i.e. no bidirectional mask for image tokens": the
model built the image-aware mask from ``token_type_ids`` but passed the decoder layers the plain causal one, so
an image's tokens read only the image tokens before them. The fix hands the layers the mask that holds the
image blocks (``causal | same_image``).

The idiom: transformers' Gemma 3 text attention (``q_proj``/``k_proj``/``v_proj`` with fewer kv heads,
``view(B, T, -1, d).transpose(1, 2)``, ``q_norm``/``k_norm`` RMSNorms over the head width, ``rotate_half``
rotary from ``position_ids``, ``repeat_kv``, ``scaling = query_pre_attn_scalar ** -0.5``, a ``(B, 1, T, T)``
additive mask sliced to the keys, ``softmax`` in float32, ``o_proj``); the mask from the causal triangle OR'd
with the blocks of equal image group (a ``cumsum`` over the image starts), the image at tokens 1..3.

Bug (argument): ``causal-mask-passed``: the layers get the causal mask; the image blocks are built, unused."""

import sys

import torch
from torch import nn

BUGS = ("causal-mask-passed",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


class Gemma3RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        out = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.float())).type_as(x)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class Gemma3Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, base=10000.0):
        super().__init__()
        self.head_dim = hidden // heads
        self.num_key_value_groups = heads // kv_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.q_norm, self.k_norm = Gemma3RMSNorm(self.head_dim), Gemma3RMSNorm(self.head_dim)
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))

    def forward(self, hidden_states, attention_mask, position_ids):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_norm(self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2))
        k = self.k_norm(self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2))
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.num_key_value_groups), repeat_kv(v, self.num_key_value_groups)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        attn_weights = attn_weights + attention_mask[:, :, :, : k.shape[-2]]            # [mask]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(*input_shape, -1))


class Gemma3TextLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.input_layernorm = Gemma3RMSNorm(hidden)
        self.self_attn = Gemma3Attention(hidden, heads, kv_heads)

    def forward(self, inputs_embeds, token_type_ids):                                    # (B, T, D), (B, T)
        bsz, seq_len, _ = inputs_embeds.shape
        position_ids = torch.arange(seq_len).unsqueeze(0).expand(bsz, -1)
        causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()[None, None]    # (1, 1, T, T)
        is_image = token_type_ids == 1
        new_image_start = is_image & ~nn.functional.pad(is_image, (1, 0), value=0)[:, :-1]
        image_group_ids = torch.cumsum(new_image_start.int(), dim=1) - 1
        image_group_ids = torch.where(is_image, image_group_ids, -1)
        same_image = (image_group_ids[:, None, :, None] == image_group_ids[:, None, None, :]) \
            & is_image[:, None, :, None]                                                # (B, 1, T, T)
        bidirectional = causal | same_image                                             # [mask-build]
        allowed = causal.expand(bsz, 1, seq_len, seq_len) if self.bug == "causal-mask-passed" else bidirectional
        mask = torch.zeros(allowed.shape, dtype=inputs_embeds.dtype)
        mask = mask.masked_fill(~allowed, torch.finfo(inputs_embeds.dtype).min)
        h = self.input_layernorm(inputs_embeds)
        return inputs_embeds + self.self_attn(h, mask, position_ids)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    token_type_ids[:, 1:4] = 1                                                          # an image at 1..3
    return Gemma3TextLayer(D, H, H_kv, bug).eval(), (torch.randn(B, T, D), token_type_ids)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
