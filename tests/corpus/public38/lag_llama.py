"""time-series-foundation-models/lag-llama, lag_llama/model/module.py (commit of Apr 2024, ``LagLlamaModel``,
``CausalSelfAttention``, ``LTSMRotaryEmbedding``/``apply_rotary_pos_emb``, ``RMSNorm``, ``prepare_input``) with
gluonts' ``StdScaler`` and ``lagged_sequence_values``: a decoder-only forecaster over a univariate series: the past
``(B, P + C)`` (``P`` lag history before the ``C`` context steps) standardised per series (mean and std over the
observed time steps, ``keepdim``), lag features ``(B, C, n_lags)`` sliced from the end of the history
(``full[..., -l - C : -l or None]`` for each lag ``l``, ``torch.stack(dim=-1)``), the scaler's
``log1p(|loc|)`` and ``log(scale)`` appended as static features expanded over the context, ``wte``
``Linear(n_lags + 2, D)``, causal self-attention with rotary (``c_attn`` ``split(D, dim=2)``,
``view(B, T, H, d).transpose(1, 2)``, ``scaled_dot_product_attention(is_causal=True)``), SwiGLU MLP, RMSNorm.

Bugs: ``lag-window-from-the-start``: each lag's window counted from the start of the history
(``full[..., l : l + C]``) instead of back from its end (``-l - C : -l``): lag 0 reads the oldest C steps, not
the context (the slip of porting gluonts' negative indices to positive ones); ``causal-flag-dropped``:
``is_causal`` left out of the attention call (every step sees the future context; the slip reported when
porting nanoGPT-style attention to an explicit ``attn_mask`` call)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class StdScaler(nn.Module):
    def __init__(self, dim=1, keepdim=True, minimum_scale=1e-5):
        super().__init__()
        self.dim, self.keepdim, self.minimum_scale = dim, keepdim, minimum_scale

    def forward(self, data, weights):
        denominator = weights.sum(self.dim, keepdim=self.keepdim).clamp_min(1.0)
        loc = (data * weights).sum(self.dim, keepdim=self.keepdim) / denominator
        variance = (((data - loc) * weights) ** 2).sum(self.dim, keepdim=self.keepdim) / denominator
        scale = torch.sqrt(variance + self.minimum_scale)
        return (data - loc) / scale, loc, scale


def lagged_sequence_values(indices, prior_sequence, sequence, dim, bug=""):
    full_sequence = torch.cat((prior_sequence, sequence), dim=dim)
    lags_values = []
    for lag_index in indices:
        begin_index = -lag_index - sequence.shape[dim]
        end_index = -lag_index if lag_index > 0 else None
        if bug == "lag-window-from-the-start":
            begin_index, end_index = lag_index, lag_index + sequence.shape[dim]
        lags_values.append(full_sequence[..., begin_index:end_index])
    return torch.stack(lags_values, dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, size, eps=1e-5):
        super().__init__()
        self.scale, self.eps = nn.Parameter(torch.ones(size)), eps

    def forward(self, x):
        norm_x = x.pow(2).mean(dim=-1, keepdim=True)
        return self.scale * (x * torch.rsqrt(norm_x + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LTSMRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, seq_len):
        t = torch.arange(seq_len, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[None, None, :, :], emb.sin()[None, None, :, :]


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, bug=""):
        super().__init__()
        self.n_head, self.n_embd, self.bug = n_head, n_embd, bug
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.rotary_emb = LTSMRotaryEmbedding(n_embd // n_head)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        cos, sin = self.rotary_emb(T)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if self.bug == "causal-flag-dropped":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        hidden = 4 * n_embd
        self.c_fc1 = nn.Linear(n_embd, hidden, bias=False)
        self.c_fc2 = nn.Linear(n_embd, hidden, bias=False)
        self.c_proj = nn.Linear(hidden, n_embd, bias=False)

    def forward(self, x):
        return self.c_proj(F.silu(self.c_fc1(x)) * self.c_fc2(x))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, bug=""):
        super().__init__()
        self.rms_1, self.rms_2 = RMSNorm(n_embd), RMSNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, bug)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.rms_1(x))
        return x + self.mlp(self.rms_2(x))


class LagLlamaModel(nn.Module):
    def __init__(self, context_length, lags_seq, n_embd, n_head, n_layer=2, bug=""):
        super().__init__()
        self.context_length, self.lags_seq = context_length, lags_seq
        self.scaler, self.bug = StdScaler(dim=1, keepdim=True), bug
        self.wte = nn.Linear(len(lags_seq) + 2, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head, bug) for _ in range(n_layer))
        self.ln_f = RMSNorm(n_embd)
        self.param_proj = nn.Linear(n_embd, 3)   # (a Student-t's df, loc, scale)

    def prepare_input(self, past_target, past_observed_values):
        scaled_past_target, loc, scale = self.scaler(past_target, past_observed_values)
        input = scaled_past_target[..., -self.context_length:]
        prior_input = scaled_past_target[..., : -self.context_length]
        lags = lagged_sequence_values(self.lags_seq, prior_input, input, dim=-1, bug=self.bug)
        static_feat = torch.cat((loc.abs().log1p(), scale.log()), dim=-1)
        expanded_static_feat = static_feat.unsqueeze(1).expand(-1, input.shape[-1], -1)
        return torch.cat((lags, expanded_static_feat), dim=-1)

    def forward(self, past_target, past_observed_values):
        x = self.wte(self.prepare_input(past_target, past_observed_values))
        for block in self.h:
            x = block(x)
        return self.param_proj(self.ln_f(x))


BUGS = ("lag-window-from-the-start", "causal-flag-dropped")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    """``T`` context steps after 7 steps of lag history; lags 0, 1, 2, 6 (Lag-Llama's ``lags_seq`` minus one)."""
    torch.manual_seed(0)
    model = LagLlamaModel(T, [0, 1, 2, 6], D, H, bug=bug).eval()
    past_target = torch.randn(B, 7 + T).cumsum(-1)
    return model, (past_target, torch.ones(B, 7 + T))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
