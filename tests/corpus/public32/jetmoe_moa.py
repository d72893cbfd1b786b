"""jetmoe/transformers, src/transformers/models/jetmoe/modeling_jetmoe.py (v4.46, ``JetMoeAttention``,
``JetMoeMoA``, ``JetMoeTopKGating``): JetMoE's mixture of attention heads. A router picks ``K`` of ``E`` query
experts per token (``topk`` of the logits, ``softmax`` over the chosen); each chosen expert maps ``D`` to
``H_kv d`` query channels, so a token has ``H = K H_kv`` query heads (expert-major); keys and values come from
one shared ``kv_proj`` (``2 H_kv d``, ``chunk(2, -1)``) and are tiled ``repeat(1, K, 1, 1)`` to line up with the
expert-major heads; causal ``scaled_dot_product_attention``; the output ``transpose(1, 2).reshape(B, T, K,
H_kv d)`` goes back through each chosen expert's output map, weighted by its gate and summed over ``K``.
(Written dense: every expert's map is computed, then the chosen ones gathered; the public code sorts tokens to
experts, which gives the same numbers.)

Bugs: ``kv-repeat-interleave``: the keys and values widened ``repeat_interleave(K, dim=1)`` (the GQA idiom, wrong
for expert-major heads: head ``k H_kv + h`` then reads kv head ``(k H_kv + h) // K``); ``merge-without-transpose``:
the output ``reshape(B, T, K, H_kv d)`` taken straight from ``(B, H, T, d)``."""

import sys

import torch
from torch import nn


class JetMoeMoA(nn.Module):
    def __init__(self, dim, kv_heads, top_k, experts, bug=""):
        super().__init__()
        self.kv_heads, self.top_k, self.head_dim, self.bug = kv_heads, top_k, dim // (kv_heads * top_k), bug
        width = kv_heads * self.head_dim
        self.router = nn.Linear(dim, experts, bias=False)
        self.input_linear = nn.Parameter(torch.randn(experts, width, dim) * dim ** -0.5)
        self.output_linear = nn.Parameter(torch.randn(experts, dim, width) * width ** -0.5)
        self.kv_proj = nn.Linear(dim, 2 * width, bias=False)

    def forward(self, hidden_states):
        bsz, seq_len, _ = hidden_states.shape
        logits = self.router(hidden_states)                                   # (B, T, E)
        top_logits, top_idx = logits.topk(self.top_k, dim=-1)                 # (B, T, K)
        gates = torch.softmax(top_logits, dim=-1)
        q_all = torch.einsum("btd,eod->bteo", hidden_states, self.input_linear)
        q = torch.gather(q_all, 2, top_idx[..., None].expand(-1, -1, -1, q_all.shape[-1]))
        q = q.reshape(bsz, seq_len, self.top_k * self.kv_heads, self.head_dim).transpose(1, 2)
        k, v = self.kv_proj(hidden_states).chunk(2, dim=-1)
        k = k.view(bsz, seq_len, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(bsz, seq_len, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.bug == "kv-repeat-interleave":
            k, v = k.repeat_interleave(self.top_k, dim=1), v.repeat_interleave(self.top_k, dim=1)
        else:
            k, v = k.repeat(1, self.top_k, 1, 1), v.repeat(1, self.top_k, 1, 1)
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.bug != "merge-without-transpose":
            out = out.transpose(1, 2)
        out = out.reshape(bsz, seq_len, self.top_k, self.kv_heads * self.head_dim)
        w_out = self.output_linear[top_idx]                                   # (B, T, K, D, H_kv d)
        y = torch.einsum("btko,btkdo->btkd", out, w_out)
        return (y * gates[..., None]).sum(dim=2)


class JetMoeBlock(nn.Module):
    def __init__(self, dim, kv_heads, top_k, experts, bug=""):
        super().__init__()
        self.input_layernorm = nn.RMSNorm(dim, eps=1e-6)
        self.self_attention = JetMoeMoA(dim, kv_heads, top_k, experts, bug)
        self.post_attention_layernorm = nn.RMSNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.self_attention(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


BUGS = ("kv-repeat-interleave", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=7 D=48 H=6 H_kv=3",)
EQUAL = {"B=2 T=7 D=48 H=6 H_kv=3": "B=6 T=6 D=48 H=6 H_kv=3"}


def build(bug="", B=2, T=7, D=48, H_kv=3):
    torch.manual_seed(0)
    return JetMoeBlock(D, H_kv, 2, 4, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
