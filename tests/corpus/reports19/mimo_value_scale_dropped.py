"""NVIDIA-NeMo/Megatron-Bridge pull request #4155 ("[model] fix: apply attention_value_scale to V in
MiMo-V2-Flash", merged): ``MiMoV2FlashTEDotProductAttention.__init__`` read ``attention_value_scale`` (0.707 in
the public checkpoint) from the Hugging Face config but ``forward`` never used it, so every layer's attention
output was about 1.414 times the reference's. The fix multiplies the values by the scale before the kernel,
as Hugging Face's and vLLM's implementations do; the pull request explains why it cannot be folded into
``softmax_scale`` ("softmax is non-linear in its argument, so scaling QK^T changes the attention
distribution").

The idiom (MiMo-V2-Flash as Hugging Face writes it): Llama-style ``q_proj``/``k_proj``/``v_proj`` with
grouped key/value heads, ``view(*input_shape, -1, head_dim).transpose(1, 2)``, ``rotate_half`` rotary,
``value_states * self.attention_value_scale``, ``repeat_kv``, eager attention (``matmul * self.scaling``,
a causal mask, ``softmax``), ``o_proj``.

Twins (argument): ``value-scale-dropped``: the reported bug itself, the scale never applied;
``scale-in-softmax``: the value scale folded into the scores' scale (the mistake the pull request explains).
Both are twins: without the config, an attention with no value scale is what most models are (Llama, Qwen),
and scores scaled by another number than ``1/sqrt(head_dim)`` are correct code elsewhere (Gemma 2 27B's
``query_pre_attn_scalar`` of 144 with heads of 128); nothing the trace records says what this model meant."""

import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("value-scale-dropped", "scale-in-softmax")
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class MiMoV2Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, attention_value_scale=0.707, bug=""):
        super().__init__()
        self.head_dim, self.bug = hidden_size // num_heads, bug
        self.num_key_value_groups = num_heads // num_kv_heads
        self.scaling = self.head_dim ** -0.5
        self.attention_value_scale = attention_value_scale
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, hidden_states):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        position_ids = torch.arange(input_shape[1])
        freqs = torch.outer(position_ids.float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        query_states = query_states * cos + rotate_half(query_states) * sin
        key_states = key_states * cos + rotate_half(key_states) * sin
        scaling = self.scaling
        if self.bug == "scale-in-softmax":
            scaling = self.scaling * self.attention_value_scale                                # [scale]
        elif self.bug != "value-scale-dropped":
            value_states = value_states * self.attention_value_scale                           # [value-scale]
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * scaling       # [scores]
        q_len = attn_weights.shape[-1]
        causal_mask = torch.full((q_len, q_len), torch.finfo(attn_weights.dtype).min).triu(1)
        attn_weights = nn.functional.softmax(attn_weights + causal_mask, dim=-1)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
        return self.o_proj(attn_output.reshape(*input_shape, -1))


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return MiMoV2Attention(D, H, H_kv, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
