"""thu-nics/C2C pull request #19 ("Fix generate() decoding: attention mask, position ids and EOS token"): while
decoding, ``generate()`` passed the full 2-D mask (the cached prompt's columns and the new token's) to
``forward()``, but ``forward()`` cut it ``base_attention_mask[:, :end]``, with ``end`` the number of tokens of
the current call: at a decode step a ``(B, 1)`` mask, the prompt's first column, while the cache holds the whole
prompt, "so the receiver stops masking the left padding after the first generated token". The fix offsets the
slice by the cached length (the decode step keeps the mask's ``past + 1`` columns).

The idiom: a Llama-style decoder attention with a key/value cache (``q_proj/k_proj/v_proj``, ``view(B, L, H,
d).transpose(1, 2)``, ``torch.cat([past_key, key], dim=2)``), the 2-D mask made additive ``(1.0 - mask[:, None,
None, :]) * finfo.min`` over the key columns, a causal part at the prefill, ``softmax(-1, dtype=float32)``; a
left-padded prompt of T tokens (the second row padded by two), then one decode step.

Bug (argument): ``mask-first-column``: the decode step's mask cut to the step's own length, ``mask[:, :1]``."""

import sys

import torch
from torch import nn

BUGS = ("mask-first-column",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class CachedAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def shape(self, x):
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)    # (B, H, L, d)

    def forward(self, hidden_states, attention_mask, past=None):          # (B, L, D), (B, P+L), ((B, H, P, d),)*2
        bsz, q_len, _ = hidden_states.shape
        query, key, value = (self.shape(p(hidden_states)) for p in (self.q_proj, self.k_proj, self.v_proj))
        if past is not None:
            key, value = torch.cat([past[0], key], dim=2), torch.cat([past[1], value], dim=2)
        end = q_len if self.bug == "mask-first-column" else key.shape[2]
        mask = attention_mask[:, :end]                                        # [slice]
        additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        if q_len > 1:
            causal = torch.ones(q_len, q_len, dtype=torch.bool).triu(1)
            additive = additive.masked_fill(causal, torch.finfo(torch.float32).min)
        scores = torch.matmul(query, key.transpose(2, 3)) / self.head_dim ** 0.5 + additive
        weights = scores.softmax(dim=-1, dtype=torch.float32)
        out = torch.matmul(weights, value).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out), (key, value)


class PrefillThenDecode(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.attn = CachedAttention(dim, heads, bug)

    def forward(self, prompt, step, attention_mask):                     # (B, T, D), (B, 1, D), (B, T)
        _, past = self.attn(prompt, attention_mask)
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones(attention_mask.shape[0], 1)], dim=1)
        out, _ = self.attn(step, attention_mask, past)
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, :2] = 0                                                  # the second prompt left-padded by two
    return PrefillThenDecode(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
