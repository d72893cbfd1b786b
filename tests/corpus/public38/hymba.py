"""NVIDIA Hymba (nvidia/Hymba-1.5B-Base on the Hugging Face hub, modeling_hymba.py, revision of Nov 2024:
``HymbaModel`` with ``memory_tokens``, ``HymbaBlock`` / ``HymbaFlexAttention``, ``repeat_kv``,
``apply_rotary_pos_emb``): Hymba's hybrid-head layer: learned meta tokens ``(M, D)`` prepended to every sequence
(``memory_tokens.unsqueeze(0).repeat(B, 1, 1)`` and ``cat`` on the tokens), one ``in_proj`` feeding attention
heads and a state-space branch in parallel (here a gated causal depthwise conv, as Mamba's ``x``/``z``), grouped
-query attention with rotary and a sliding causal window in which the meta tokens stay visible to every query;
the two branches' outputs each normalised and averaged (``(norm(attn) + norm(ssm)) / 2``), ``out_proj``; the
meta tokens dropped from the model's output (``hidden_states[:, M:]``).

Bugs: ``repeat-kv-tiled``: ``repeat_kv`` written ``k.repeat(1, n_rep, 1, 1)`` (key/value heads tiled, so
query head ``h`` reads kv head ``h % H_kv`` where Hymba's ``repeat_kv`` ``expand`` + ``reshape`` gives
``h // n_rep``; the slip reported against several GQA ports); ``meta-dropped-from-the-end``: the output sliced
``hidden_states[:, :T]`` (the meta tokens kept, the last M tokens dropped: the natural slip of cutting the
output back to the input's length)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class HymbaBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, num_memory_tokens, window, bug=""):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.bug = num_heads, num_kv_heads, bug
        self.head_dim = hidden_size // num_heads
        self.num_memory_tokens, self.window = num_memory_tokens, window
        self.kv_dim = num_kv_heads * self.head_dim
        self.intermediate = hidden_size
        self.in_proj = nn.Linear(hidden_size, hidden_size + 2 * self.kv_dim + 2 * self.intermediate, bias=False)
        self.conv1d = nn.Conv1d(self.intermediate, self.intermediate, 4, groups=self.intermediate, padding=3)
        self.pre_avg_layernorm1 = RMSNorm(hidden_size)
        self.pre_avg_layernorm2 = RMSNorm(self.intermediate)
        self.ssm_out = nn.Linear(self.intermediate, hidden_size, bias=False)
        self.out_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotary(self, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def attention_mask(self, n):
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        allowed = (j <= i) & ((i - j < self.window) | (j < self.num_memory_tokens))
        return torch.zeros(n, n).masked_fill(~allowed, float("-inf"))

    def forward(self, hidden_states, position_ids):
        B, N, _ = hidden_states.shape
        projected = self.in_proj(hidden_states)
        q, k, v, x, z = projected.split(
            [self.num_heads * self.head_dim, self.kv_dim, self.kv_dim, self.intermediate, self.intermediate], dim=-1)
        q = q.view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, N, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, N, self.num_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(position_ids)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        n_rep = self.num_heads // self.num_kv_heads
        if self.bug == "repeat-kv-tiled":
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
        else:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=self.attention_mask(N))
        attn = attn.transpose(1, 2).reshape(B, N, -1)
        # the state-space heads (a gated causal depthwise conv in place of the selective scan)
        x = self.conv1d(x.transpose(1, 2))[..., :N].transpose(1, 2)
        ssm = self.ssm_out(F.silu(x) * F.silu(z))
        out = (self.pre_avg_layernorm1(attn) + self.pre_avg_layernorm2(ssm)) / 2
        return self.out_proj(out)


class HymbaModel(nn.Module):
    def __init__(self, vocab, hidden_size, num_heads, num_kv_heads, num_memory_tokens=3, window=4, depth=2,
                 bug=""):
        super().__init__()
        self.bug = bug
        self.embed_tokens = nn.Embedding(vocab, hidden_size)
        self.memory_tokens = nn.Parameter(torch.randn(num_memory_tokens, hidden_size))
        self.layers = nn.ModuleList(HymbaBlock(hidden_size, num_heads, num_kv_heads, num_memory_tokens, window, bug)
                                    for _ in range(depth))
        self.input_layernorms = nn.ModuleList(RMSNorm(hidden_size) for _ in range(depth))
        self.final_layernorm = RMSNorm(hidden_size)
        self.lm_head = nn.Linear(hidden_size, vocab, bias=False)

    def forward(self, input_ids):
        B, T = input_ids.shape
        inputs_embeds = self.embed_tokens(input_ids)
        memory = self.memory_tokens.unsqueeze(0).repeat(B, 1, 1)
        hidden_states = torch.cat([memory, inputs_embeds], dim=1)
        position_ids = torch.arange(hidden_states.shape[1]).unsqueeze(0).expand(B, -1)
        for layer, norm in zip(self.layers, self.input_layernorms):
            hidden_states = hidden_states + layer(norm(hidden_states), position_ids)
        if self.bug == "meta-dropped-from-the-end":
            hidden_states = hidden_states[:, :T]
        else:
            hidden_states = hidden_states[:, memory.shape[1]:]
        return self.lm_head(self.final_layernorm(hidden_states))


BUGS = ("repeat-kv-tiled", "meta-dropped-from-the-end")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    """``H`` query heads over ``H // 2`` key/value heads; 3 meta tokens; a window of 4."""
    torch.manual_seed(0)
    model = HymbaModel(50, D, H, H // 2, bug=bug).eval()
    return model, (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
