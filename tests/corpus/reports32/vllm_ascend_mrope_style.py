"""vllm-project/vllm-ascend pull request #12820 ("[BugFix] Fix MRotaryEmbedding issue #12765", after
vllm-project/vllm issue #49290): ``AscendMRotaryEmbedding.forward_oot`` called ``npu_mrope`` with
``rotary_mode="half"`` whatever the model, ignoring ``mrope_interleaved`` / ``is_neox_style``: GPT-J style models
(GLM-4V, GLM-OCR) had every rotary feature paired with the wrong partner, ``rotate(x[0], x[64])`` where the weights
expect ``rotate(x[0], x[1])`` ("silently corrupting all position information"). The fix picks ``"interleave"``
for GPT-J style models.

The idiom (vLLM's ``MRotaryEmbedding.forward_native`` and ``apply_rotary_emb``): packed tokens ``(num_tokens,
heads * head_size)`` with no batch axis; ``positions`` of shape ``(3, num_tokens)`` (temporal, height, width; one
text prompt, so the three rows are equal); ``cos_sin_cache[positions]`` chunked into cos and sin, each section of
``mrope_section`` taken from its own position row; ``apply_rotary_emb`` pairs ``x[..., ::2]`` with ``x[..., 1::2]``
and ``stack(...).flatten(-2)`` for GPT-J style, the two halves and ``cat`` for NeoX style; then causal attention
per head (``scaled_dot_product_attention`` on ``(heads, tokens, head_size)``) and ``o_proj``.

Bug (rotary pairing): ``neox-on-gptj``: a GPT-J style model's queries and keys rotated in halves. The table and
the rotation agree with each other here (as in the kernel's half mode): only the model's convention says which
features were trained as pairs."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("neox-on-gptj",)
TWINS = ()
DIMS = ("T=6 D=32 H=4",)
EQUAL = {"T=6 D=32 H=4": "T=4 D=32 H=4"}
MAX_POS = 64


def apply_rotary_emb(x, cos, sin, is_neox_style):
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)                                  # (n, 1, d/2)
    if is_neox_style:
        x1, x2 = torch.chunk(x, 2, dim=-1)                                           # (n, h, d/2)
    else:
        x1, x2 = x[..., ::2], x[..., 1::2]                                           # (n, h, d/2)
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    if is_neox_style:
        return torch.cat((o1, o2), dim=-1)                                           # (n, h, d)
    return torch.stack((o1, o2), dim=-1).flatten(-2)                                 # (n, h, d)


class MRotaryEmbedding(nn.Module):
    def __init__(self, head_size, mrope_section, is_neox_style, base=10000.0):
        super().__init__()
        self.head_size, self.mrope_section, self.is_neox_style = head_size, mrope_section, is_neox_style
        inv_freq = 1.0 / base ** (torch.arange(0, head_size, 2).float() / head_size)
        freqs = torch.outer(torch.arange(MAX_POS).float(), inv_freq)                 # (P, d/2)
        self.register_buffer("cos_sin_cache", torch.cat((freqs.cos(), freqs.sin()), dim=-1))   # (P, d)

    def forward(self, positions, query, key, bug=""):
        num_tokens = positions.shape[-1]
        cos, sin = self.cos_sin_cache[positions].chunk(2, dim=-1)                     # (3, n, d/2)
        cos = torch.cat([m[i] for i, m in enumerate(cos.split(self.mrope_section, dim=-1))], dim=-1)   # (n, d/2)
        sin = torch.cat([m[i] for i, m in enumerate(sin.split(self.mrope_section, dim=-1))], dim=-1)   # (n, d/2)
        neox = True if bug == "neox-on-gptj" else self.is_neox_style
        query = query.view(num_tokens, -1, self.head_size)                            # (n, h, d)
        key = key.view(num_tokens, -1, self.head_size)                                # (n, h, d)
        query = apply_rotary_emb(query, cos, sin, neox).reshape(num_tokens, -1)      # (n, h·d)
        key = apply_rotary_emb(key, cos, sin, neox).reshape(num_tokens, -1)          # (n, h·d)
        return query, key


class Glm4vAttention(nn.Module):
    def __init__(self, hidden, heads, bug=""):
        super().__init__()
        self.bug, self.heads, self.head_size = bug, heads, hidden // heads
        self.qkv_proj = nn.Linear(hidden, 3 * hidden)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        half = self.head_size // 2
        section = [half - 2 * (half // 4), half // 4, half // 4]
        self.rotary_emb = MRotaryEmbedding(self.head_size, section, is_neox_style=False)

    def forward(self, positions, hidden_states):
        n = hidden_states.shape[0]
        q, k, v = self.qkv_proj(hidden_states).chunk(3, dim=-1)                       # (n, h·d) each
        q, k = self.rotary_emb(positions, q, k, bug=self.bug)
        q = q.view(n, self.heads, self.head_size).transpose(0, 1)                     # (h, n, d)
        k = k.view(n, self.heads, self.head_size).transpose(0, 1)                     # (h, n, d)
        v = v.view(n, self.heads, self.head_size).transpose(0, 1)                     # (h, n, d)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)                # (h, n, d)
        return self.o_proj(out.transpose(0, 1).reshape(n, -1))                       # (n, D)


def build(bug="", T=6, D=32, H=4):
    torch.manual_seed(0)
    positions = torch.arange(T).expand(3, T)                                         # (3, n)
    return Glm4vAttention(D, H, bug=bug).eval(), (positions, torch.randn(T, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
