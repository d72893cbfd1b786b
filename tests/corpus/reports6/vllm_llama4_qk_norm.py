"""vllm-project/vllm PR #16311 ("[BugFix] llama4 qknorm should be not shared across head", merged; resolves
issue #16300, a TP=4 accuracy drop): vLLM's Llama 4 attention applied the weightless RMS ``qk_norm`` to the
flat projections ``(tokens, H · d)``, normalising each token's query over every head at once; Llama 4
normalises each head's ``d`` features on their own (MMLU-Pro 0.6858 before, 0.7153 after). The fix views q
and k as ``(tokens, H, d)`` before the norm.

Llama 4's idiom (transformers' ``Llama4TextAttention``): ``q_proj``/``k_proj``/``v_proj``/``o_proj``,
``view(B, T, -1, head_dim)``, rotary embedding, ``qk_norm`` = ``Llama4TextL2Norm`` (``x * rsqrt(mean(x²,
-1) + eps)``, no weight) on ``(B, T, H, d)``, then ``transpose(1, 2)``, ``q @ kᵀ · scaling``, causal mask,
``softmax``, ``reshape(B, T, -1)``, ``o_proj``. Here without rotary (it plays no part in the report).

Twin (argument): ``norm-across-heads``: vLLM's norm over the flat ``H · d``. A QK norm over the whole width
is a design other models use on purpose (OLMo 2 normalises ``q_proj``'s whole output before splitting the
heads; gpt-neox's ``qk_layernorm_over_heads``): which one Llama 4 was trained with is a fact about its
weights, not a layout fact."""

import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("norm-across-heads",)
DIMS = ("B=2 T=6 D=32 H=4",)


class L2Norm(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)      # [qknorm]


class Llama4TextAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, hidden_size // num_heads, bug
        self.scaling = self.head_dim ** -0.5
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(hidden_size, hidden_size, bias=False)
                                                              for _ in range(4))
        self.qk_norm = L2Norm()

    def forward(self, hidden_states):
        B, T, _ = hidden_states.shape
        hidden_shape = (B, T, -1, self.head_dim)
        q, k = self.q_proj(hidden_states), self.k_proj(hidden_states)           # (B, T, D)
        if self.bug == "norm-across-heads":
            q, k = self.qk_norm(q), self.qk_norm(k)
        q, k = q.view(hidden_shape), k.view(hidden_shape)                        # (B, T, H, d)
        if self.bug != "norm-across-heads":
            q, k = self.qk_norm(q), self.qk_norm(k)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)        # (B, H, T, d)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scaling         # (B, H, T, T)
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        attn_weights = nn.functional.softmax(attn_weights + causal, dim=-1)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).reshape(B, T, -1)   # (B, T, D)
        return self.o_proj(attn_output)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Llama4TextAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
