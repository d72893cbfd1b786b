"""huggingface/transformers pull request #34942 ("[FlexAttention] Update gemma2"): Gemma2's
``flex_attention_forward`` returned flex attention's output as the kernel gives it, ``(B, H, T, d)``, while
every other attention function of the model returns ``(B, T, H, d)`` (the eager one ends with
``attn_output.transpose(1, 2).contiguous()``); ``Gemma2Attention.forward`` then ran
``attn_output.reshape(bsz, q_len, -1)`` on it, so the flex path merged the heads' rows as tokens. The fix adds
the missing ``attn_output.transpose(1, 2).contiguous()`` to the flex function ("mostly because we were missing
transpose").

The idiom (Gemma2 before the attention interface): ``q_proj``/``k_proj``/``v_proj`` to ``num_heads * head_dim``
(``head_dim`` set apart from ``hidden_size // num_heads``), ``view(bsz, q_len, -1, head_dim).transpose(1, 2)``,
rotary with ``rotate_half``, ``repeat_kv`` for the key/value groups, the attention function chosen by
``config._attn_implementation`` (the flex one written here in torch: a ``score_mod`` with the tanh soft cap and
a causal ``mask_mod`` on ``scaling = query_pre_attn_scalar ** -0.5`` scores), ``reshape(bsz, q_len, -1)``,
``o_proj``.

Bug (argument): ``flex-no-transpose``: the flex function's output returned without ``transpose(1, 2)``."""

import sys

import torch
from torch import nn

BUGS = ("flex-no-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2 d_k=16",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class Gemma2RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, position_ids):
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def flex_attention_forward(query, key, value, scaling, softcap, bug=""):
    def tanh_softcap(score, q_idx, kv_idx):
        score = softcap * torch.tanh(score / softcap)
        return score.masked_fill(kv_idx > q_idx, float("-inf"))                       # (the causal mask_mod)

    q_idx = torch.arange(query.shape[-2])[:, None]
    kv_idx = torch.arange(key.shape[-2])[None, :]
    scores = tanh_softcap(torch.matmul(query, key.transpose(-2, -1)) * scaling, q_idx, kv_idx)
    attn_output = torch.matmul(scores.softmax(dim=-1), value)                           # (B, H, T, d)
    if bug == "flex-no-transpose":
        return attn_output                                                              # [flex]
    return attn_output.transpose(1, 2).contiguous()                                     # [flex]


class Gemma2Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_key_value_heads, head_dim, bug=""):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.head_dim = num_heads, num_key_value_heads, head_dim
        self.num_key_value_groups = num_heads // num_key_value_heads
        self.scaling = 256 ** -0.5                                       # (query_pre_attn_scalar)
        self.attn_logit_softcapping, self.bug = 50.0, bug
        self.q_proj = nn.Linear(hidden_size, num_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_size, bias=False)
        self.rotary_emb = Gemma2RotaryEmbedding(head_dim)

    def forward(self, hidden_states, position_ids):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(value_states, position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        query_states = query_states * cos + rotate_half(query_states) * sin
        key_states = key_states * cos + rotate_half(key_states) * sin
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_output = flex_attention_forward(query_states, key_states, value_states, self.scaling,
                                             self.attn_logit_softcapping, self.bug)
        attn_output = attn_output.reshape(bsz, q_len, -1).contiguous()
        return self.o_proj(attn_output)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2, d_k=16):
    torch.manual_seed(0)
    model = Gemma2Attention(D, H, H_kv, d_k, bug).eval()
    return model, (torch.randn(B, T, D), torch.arange(T)[None].expand(B, T))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
