"""huggingface/transformers, src/transformers/models/mllama/modeling_mllama.py (v4.45, ``MllamaTextCrossAttention``,
``MllamaCrossAttentionDecoderLayer``, ``_prepare_cross_attention_mask``): text queries ``[B, T, D]`` over image
tokens ``[B, S, D]`` (k and v projected from ``cross_attention_states``), ``q_norm``/``k_norm`` RMSNorms over the
head width, a cross mask ``[B, 1, T, S]`` from which text tokens come after the image tag (tokens before it see
no image: their rows are masked out, then zeroed by ``full_text_row_masked_out_mask``), and the residual gated
with ``cross_attn_attn_gate.tanh()``.

Bugs (argument): ``heads-split-wrong``: the queries split with ``view(B, H, T, d)`` (no transpose: the layout
``(B, H, T, d)`` written straight onto ``(B, T, H D)``, the classic slip: a head's rows mix tokens and
features)."""

import sys

import torch
from torch import nn


class MllamaTextRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class MllamaTextCrossAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.q_norm, self.k_norm = MllamaTextRMSNorm(self.head_dim), MllamaTextRMSNorm(self.head_dim)

    def forward(self, hidden_states, cross_attention_states, attention_mask):   # (B, T, D), (B, S, D), (B, 1, T, S)
        B, T, _ = hidden_states.shape
        q = self.q_proj(hidden_states)
        if self.bug == "heads-split-wrong":
            q = q.view(B, self.heads, T, self.head_dim)
        else:
            q = q.view(B, T, self.heads, self.head_dim).transpose(1, 2)         # (B, H, T, d)
        q = self.q_norm(q)
        k = self.k_proj(cross_attention_states).view(B, -1, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(cross_attention_states).view(B, -1, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_norm(k)                                                        # (B, H, S, d)
        w = torch.matmul(q, k.transpose(2, 3)) / self.head_dim**0.5 + attention_mask
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).reshape(B, T, -1)
        return self.o_proj(out)


class MllamaCrossAttentionDecoderLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.cross_attn = MllamaTextCrossAttention(dim, heads, bug)
        self.input_layernorm = MllamaTextRMSNorm(dim)
        self.cross_attn_attn_gate = nn.Parameter(torch.tensor([0.5]))

    def forward(self, hidden_states, cross_attention_states, image_start):     # (B, T, D), (B, S, D), (B,)
        B, T, _ = hidden_states.shape
        S = cross_attention_states.shape[1]
        sees = (torch.arange(T)[None, :] >= image_start[:, None])                # (B, T)
        cross_mask = (~sees)[:, None, :, None].expand(B, 1, T, S).float() * torch.finfo(torch.float32).min
        full_text_row_masked_out_mask = sees[:, None, :, None].to(hidden_states.dtype)  # (B, 1, T, 1)
        residual = hidden_states
        out = self.cross_attn(self.input_layernorm(hidden_states), cross_attention_states, cross_mask)
        out = out * full_text_row_masked_out_mask[:, 0]
        return residual + self.cross_attn_attn_gate.tanh() * out


BUGS = ("heads-split-wrong",)
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)
EQUAL = {"B=2 T=6 S=5 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    torch.manual_seed(0)
    model = MllamaCrossAttentionDecoderLayer(D, H, bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, S, D), torch.tensor([1, 2] * (B // 2) + [0] * (B % 2)))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
