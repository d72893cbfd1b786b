"""huggingface/transformers, src/transformers/models/gpt_oss/modeling_gpt_oss.py (v4.55, ``GptOssAttention``
and ``eager_attention_forward``; openai/gpt-oss ``gpt_oss/torch/model.py`` ``sdpa``): grouped key/value heads
with ``repeat_kv``, a learned per-head sink logit ``self.sinks`` (H,), reshaped ``(1, -1, 1, 1)`` and expanded
to ``(B, H, T, 1)``, concatenated as an extra key column of the masked scores, ``combined_logits -
combined_logits.max(dim=-1, keepdim=True).values``, softmax, the sink column dropped with ``probs[..., :-1]``.

Bugs (argument): ``drop-first-column``: the sink dropped as ``probs[..., 1:]`` (the sink's column taken to be
the first, as in the "prepend the sink" variants of StreamingLLM-style code): key 0's weight is thrown away and
every other key's weight is applied to the value one place before it."""

import sys

import torch
from torch import nn


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class GptOssAttention(nn.Module):
    def __init__(self, d, h, h_kv, bug=""):
        super().__init__()
        self.h, self.h_kv, self.hd, self.bug = h, h_kv, d // h, bug
        self.q_proj = nn.Linear(d, h * self.hd)
        self.k_proj = nn.Linear(d, h_kv * self.hd)
        self.v_proj = nn.Linear(d, h_kv * self.hd)
        self.o_proj = nn.Linear(h * self.hd, d)
        self.sinks = nn.Parameter(torch.randn(h))

    def forward(self, hidden_states):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.hd)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)            # (B, H, T, d)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)            # (B, H_kv, T, d)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        k, v = repeat_kv(k, self.h // self.h_kv), repeat_kv(v, self.h // self.h_kv)
        t = q.shape[2]
        causal = torch.full((t, t), torch.finfo(q.dtype).min).triu(1)[None, None]    # (1, 1, T, T)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.hd**-0.5 + causal
        sinks = self.sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, q.shape[-2], -1)   # (B, H, T, 1)
        combined_logits = torch.cat([attn_weights, sinks], dim=-1)                  # (B, H, T, T+1)
        combined_logits = combined_logits - combined_logits.max(dim=-1, keepdim=True).values
        probs = nn.functional.softmax(combined_logits, dim=-1, dtype=combined_logits.dtype)
        if self.bug == "drop-first-column":
            scores = probs[..., 1:]                                                  # bug: drops key 0
        else:
            scores = probs[..., :-1]                                                 # (B, H, T, T)
        out = torch.matmul(scores, v).transpose(1, 2).contiguous()                  # (B, T, H, d)
        return self.o_proj(out.reshape(*input_shape, -1))


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    return GptOssAttention(D, H, H_kv, bug).eval(), (torch.randn(B, T, D),)


BUGS = ("drop-first-column",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
