"""TransformerLensOrg/TransformerLens issue #364, fixed by PR #365 ("Fix bug in rotary embedding for models
other than llama and gpt-neo"): ``rotate_every_two`` tested ``if (self.cfg.original_architecture in
["GPTNeoXForCausalLM", "LlamaForCausalLM"],):``, a one-element tuple (the trailing comma), always true, so
GPT-J, whose angle table repeats each frequency for adjacent features (``einops.repeat(freq, "d -> (d
2)")``), was rotated by the split-half branch (feature i paired with i + r/2): each rotated pair mixed two
angles and the scores stopped depending on the relative position alone. The fix drops the comma, so GPT-J
takes the ``[..., ::2]``/``[..., 1::2]`` branch.

TransformerLens's idiom (``components.py`` of the time): ``W_Q``/``W_K``/``W_V`` as ``(head_index, d_model,
d_head)`` with ``einsum("batch pos d_model, head_index d_model d_head -> batch pos head_index d_head")``,
``calculate_sin_cos_rotary`` (``pos[:, None] / freq[None, :]``), ``apply_rotary`` on the first ``rotary_dim``
features of ``(batch, pos, head_index, d_head)`` (GPT-J's partial rotary; the rest passed through),
``rotary_cos[:pos, None, :]``, scores by ``einsum`` ``/ attn_scale``, the causal mask as ``IGNORE``,
``softmax(dim=-1)``, ``z``, ``W_O`` summed over the heads, ``b_O``. Here ``rotary_dim = d_head / 2``.

Bug (argument): ``comma-always-true``: the split-half rotation on GPT-J's interleaved table."""

import sys

import einops
import torch
from torch import nn

BUGS = ("comma-always-true",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, n_ctx=32, original_architecture="GPTJForCausalLM", bug=""):
        super().__init__()
        self.d_head, self.bug = d_model // n_heads, bug
        self.rotary_dim, self.original_architecture = self.d_head // 2, original_architecture
        self.W_Q = nn.Parameter(torch.randn(n_heads, d_model, self.d_head) * 0.2)
        self.W_K = nn.Parameter(torch.randn(n_heads, d_model, self.d_head) * 0.2)
        self.W_V = nn.Parameter(torch.randn(n_heads, d_model, self.d_head) * 0.2)
        self.W_O = nn.Parameter(torch.randn(n_heads, self.d_head, d_model) * 0.2)
        self.b_Q, self.b_K, self.b_V = (nn.Parameter(torch.zeros(n_heads, self.d_head)) for _ in range(3))
        self.b_O = nn.Parameter(torch.zeros(d_model))
        self.attn_scale = self.d_head ** 0.5
        self.register_buffer("mask", torch.tril(torch.ones((n_ctx, n_ctx)).bool()))
        self.register_buffer("IGNORE", torch.tensor(-1e5))
        sin, cos = self.calculate_sin_cos_rotary(self.rotary_dim, n_ctx)
        self.register_buffer("rotary_sin", sin)
        self.register_buffer("rotary_cos", cos)

    def calculate_sin_cos_rotary(self, rotary_dim, n_ctx, base=10000):
        pos = torch.arange(n_ctx, dtype=torch.float32)
        dim = torch.arange(rotary_dim // 2, dtype=torch.float32)
        freq = base ** (dim / (rotary_dim / 2))
        if self.original_architecture in ["GPTNeoXForCausalLM", "LlamaForCausalLM"]:
            freq = einops.repeat(freq, "d -> (2 d)")
        else:
            freq = einops.repeat(freq, "d -> (d 2)")
        angles = pos[:, None] / freq[None, :]
        return torch.sin(angles), torch.cos(angles)

    def rotate_every_two(self, x):
        rot_x = x.clone()
        half_split = self.original_architecture in ["GPTNeoXForCausalLM", "LlamaForCausalLM"]
        if (half_split,) if self.bug == "comma-always-true" else half_split:                  # [pairing]
            n = x.size(-1) // 2
            rot_x[..., :n] = -x[..., n:]
            rot_x[..., n:] = x[..., :n]
        else:
            rot_x[..., ::2] = -x[..., 1::2]
            rot_x[..., 1::2] = x[..., ::2]
        return rot_x

    def apply_rotary(self, x):
        x_pos = x.size(1)
        x_rot, x_pass = x[..., :self.rotary_dim], x[..., self.rotary_dim:]
        x_flip = self.rotate_every_two(x_rot)
        x_rotated = x_rot * self.rotary_cos[:x_pos, None, :] + x_flip * self.rotary_sin[:x_pos, None, :]
        return torch.cat([x_rotated, x_pass], dim=-1)

    def forward(self, resid_pre):
        q = torch.einsum("bpm,imh->bpih", resid_pre, self.W_Q) + self.b_Q                   # (batch, pos, head, d_head)
        k = torch.einsum("bpm,imh->bpih", resid_pre, self.W_K) + self.b_K
        v = torch.einsum("bpm,imh->bpih", resid_pre, self.W_V) + self.b_V
        q, k = self.apply_rotary(q), self.apply_rotary(k)
        attn_scores = torch.einsum("bqih,bkih->biqk", q, k) / self.attn_scale                 # [scores]
        n = attn_scores.size(-1)
        attn_scores = torch.where(self.mask[:n, :n], attn_scores, self.IGNORE)
        pattern = attn_scores.softmax(dim=-1)
        z = torch.einsum("bkih,biqk->bqih", v, pattern)
        return torch.einsum("bqih,ihm->bqm", z, self.W_O) + self.b_O


class Block(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = Attention(d_model, n_heads, bug=bug)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, resid_pre):
        normalized = self.ln1(resid_pre)
        return resid_pre + self.attn(normalized) + self.mlp(normalized)                       # GPT-J's parallel block


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Block(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
