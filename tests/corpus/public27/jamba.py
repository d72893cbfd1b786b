"""huggingface/transformers, src/transformers/models/jamba/modeling_jamba.py (v4.46, ``JambaMambaMixer.slow_forward``,
``JambaAttention``, ``JambaRMSNorm``, ``repeat_kv``): Jamba's attention layer without positional embeddings between
Mamba layers. The Mamba mixer here is its slow path cut to the parts that move axes: ``in_proj`` to ``2 * D_in``,
``transpose(1, 2)`` and ``chunk(2, dim=1)`` into the hidden states and the gate, the depthwise causal ``conv1d``
(``padding = d_conv - 1``, ``[..., :seq_len]``), SiLU, a per-channel decay scan over the tokens standing in for the
selective scan (``cumsum`` of the gated inputs along the time axis), gate, ``out_proj``; then the attention layer
(RMSNorm, grouped-query ``q/k/v_proj``, ``repeat_kv``, causal mask, softmax in float32, ``o_proj``).

Bugs: ``conv-future-taps``: the padded conv output cut ``[..., -seq_len:]`` instead of ``[..., :seq_len]`` (each
token reads ``d_conv - 1`` later tokens: the natural slip of trimming the causal conv from the wrong end);
``merge-heads-no-transpose``: ``attn_output.reshape(B, T, D)`` straight from ``(B, H, T, d)`` (the natural
slip of a merge written without the transpose back)."""

import sys

import torch
from torch import nn


class JambaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * hidden_states * torch.rsqrt(variance + self.variance_epsilon)


class JambaMambaMixer(nn.Module):
    def __init__(self, dim, expand=2, d_conv=4, bug=""):
        super().__init__()
        self.intermediate_size, self.bug = expand * dim, bug
        self.in_proj = nn.Linear(dim, 2 * self.intermediate_size, bias=False)
        self.conv1d = nn.Conv1d(self.intermediate_size, self.intermediate_size, d_conv,
                                groups=self.intermediate_size, padding=d_conv - 1)
        self.decay = nn.Parameter(torch.rand(self.intermediate_size))
        self.out_proj = nn.Linear(self.intermediate_size, dim, bias=False)

    def forward(self, input_states):                                     # (B, T, D)
        batch_size, seq_len, _ = input_states.shape
        projected_states = self.in_proj(input_states).transpose(1, 2)    # (B, 2 D_in, T)
        hidden_states, gate = projected_states.chunk(2, dim=1)
        conv_out = self.conv1d(hidden_states)
        if self.bug == "conv-future-taps":
            conv_out = conv_out[..., -seq_len:]
        else:
            conv_out = conv_out[..., :seq_len]
        hidden_states = nn.functional.silu(conv_out)
        scan = torch.cumsum(hidden_states * torch.sigmoid(self.decay)[None, :, None], dim=-1)
        scan_output = scan * nn.functional.silu(gate)
        return self.out_proj(scan_output.transpose(1, 2))


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class JambaAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.bug = heads, kv_heads, bug
        self.head_dim = dim // heads
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, hidden_states, attention_mask):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, -1).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, -1).transpose(1, 2)
        key_states = repeat_kv(key_states, self.num_heads // self.num_key_value_heads)
        value_states = repeat_kv(value_states, self.num_heads // self.num_key_value_heads)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / self.head_dim ** 0.5
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        if self.bug != "merge-heads-no-transpose":
            attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


class JambaBlock(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.mamba_norm, self.mamba = JambaRMSNorm(dim), JambaMambaMixer(dim, bug=bug)
        self.input_layernorm = JambaRMSNorm(dim)
        self.self_attn = JambaAttention(dim, heads, kv_heads, bug)

    def forward(self, hidden_states):                                    # (B, T, D)
        seq_len = hidden_states.shape[1]
        hidden_states = hidden_states + self.mamba(self.mamba_norm(hidden_states))
        mask = torch.full((seq_len, seq_len), torch.finfo(hidden_states.dtype).min).triu(1)[None, None]
        return hidden_states + self.self_attn(self.input_layernorm(hidden_states), mask)


BUGS = ("conv-future-taps", "merge-heads-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return JambaBlock(D, H, H_kv, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
