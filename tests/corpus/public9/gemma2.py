"""huggingface/transformers, src/transformers/models/gemma2/modeling_gemma2.py (``Gemma2Attention``,
``eager_attention_forward``, ``repeat_kv``;
https://github.com/huggingface/transformers/blob/main/src/transformers/models/gemma2/modeling_gemma2.py): a head
width set in the config (``self.head_dim = config.head_dim``: Gemma-7B has hidden 3072 and 16 heads of 256),
so ``q_proj`` is ``Linear(D, H * head_dim)`` and ``o_proj`` ``Linear(H * head_dim, D)``; ``hidden_shape =
(*input_shape, -1, self.head_dim)``; grouped keys and values widened by ``repeat_kv``; scores scaled by
``query_pre_attn_scalar ** -0.5`` and soft-capped with ``tanh``; the causal mask sliced ``[:, :, :,
: key_states.shape[-2]]``; the heads merged ``reshape(*input_shape, -1)``. Here D = 32, H = 4, H_kv = 2 and
head_dim 16: H·head_dim = 64 = 2·D, and the key/value width H_kv·head_dim = 32 is D itself (``--dims`` gives the
head width as ``d_k=16``, or ``head_dim=16``).

Bugs (argument): ``merge-as-hidden``: the heads merged ``reshape(bsz, -1, self.hidden_size)`` into an
``o_proj`` of ``Linear(hidden, hidden)``, code written for head_dim = D / H (the ``attn_output.reshape(bsz,
q_len, self.hidden_size)`` that transformers changed to ``reshape(*input_shape, -1)`` for Gemma's head_dim; with
``-1`` on the tokens it runs, and each row holds half a token's heads); ``merge-transposes-features``: the
output moved with ``transpose(2, 3)`` (the keys' transpose of the line above) instead of ``transpose(1, 2)``, so
the merge runs head_dim along the tokens; ``repeat-kv-tiled``: ``repeat_kv`` written with
``hidden_states.repeat(1, n_rep, 1, 1)`` (the tiling slip Llama's ``repeat_kv`` docstring warns against: it
must equal ``torch.repeat_interleave(x, dim=1, repeats=n_rep)``): query head h reads key group h mod H_kv."""

import sys

import torch
from torch import nn

BUGS = ("merge-as-hidden", "merge-transposes-features", "repeat-kv-tiled")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2 d_k=16",)


def repeat_kv(hidden_states, n_rep, tiled=False):
    if tiled:
        return hidden_states.repeat(1, n_rep, 1, 1)                                    # bug: (B, n_rep·H_kv, T, d)
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)   # (B, H, T, d)


class Gemma2Attention(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=16, bug=""):
        super().__init__()
        self.hidden_size, self.head_dim, self.bug = hidden_size, head_dim, bug
        self.num_key_value_groups = num_heads // num_kv_heads
        self.scaling, self.softcap = head_dim ** -0.5, 50.0   # query_pre_attn_scalar = head_dim (Gemma-2 9B)
        self.q_proj = nn.Linear(hidden_size, num_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=False)
        merged = hidden_size if bug == "merge-as-hidden" else num_heads * head_dim
        self.o_proj = nn.Linear(merged, hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)   # (B, H, T, d)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)     # (B, H_kv, T, d)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)   # (B, H_kv, T, d)
        tiled = self.bug == "repeat-kv-tiled"
        key_states = repeat_kv(key_states, self.num_key_value_groups, tiled)           # (B, H, T, d)
        value_states = repeat_kv(value_states, self.num_key_value_groups, tiled)       # (B, H, T, d)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling  # (B, H, T, T)
        attn_weights = attn_weights / self.softcap
        attn_weights = torch.tanh(attn_weights)
        attn_weights = attn_weights * self.softcap
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]                  # (1, 1, T, T)
        attn_weights = attn_weights + causal_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)                         # (B, H, T, d)
        if self.bug == "merge-transposes-features":
            attn_output = attn_output.transpose(2, 3).contiguous()                     # bug: (B, H, d, T)
        else:
            attn_output = attn_output.transpose(1, 2).contiguous()                     # (B, T, H, d)
        if self.bug == "merge-as-hidden":
            attn_output = attn_output.reshape(input_shape[0], -1, self.hidden_size)    # bug: (B, 2·T, D)
        else:
            attn_output = attn_output.reshape(*input_shape, -1).contiguous()           # (B, T, H·d)
        return self.o_proj(attn_output)


class Gemma2Model(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=16, bug=""):
        super().__init__()
        self.self_attn = Gemma2Attention(hidden_size, num_heads, num_kv_heads, head_dim, bug)

    def forward(self, hidden_states):
        T = hidden_states.shape[1]
        mask = torch.full((T, T), torch.finfo(hidden_states.dtype).min).triu(1)       # (T, T)
        return self.self_attn(hidden_states, mask[None, None])                         # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2, d_k=16):
    """--dims 'B=2 T=6 D=32 H=4 H_kv=2 d_k=16'."""
    torch.manual_seed(0)
    return Gemma2Model(D, H, H_kv, d_k, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
