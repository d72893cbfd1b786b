"""huggingface/transformers PR #26792 ("Remove ambiguous ``padding_mask`` and instead use a 2D->4D Attn Mask
Mapper", merged; patrickvonplaten: "this corrects a bug that was in Mistral's windowed attention"): Mistral's
``_make_sliding_window_causal_mask`` banded the causal mask with ``triu(mask, diagonal=-sliding_window)``,
which keeps ``sliding_window + 1`` keys per query (itself and ``sliding_window`` before it); the fix hides
every key below the diagonal ``past_key_values_length - sliding_window + 1``, ``sliding_window`` keys in all.

Mistral's idiom: ``q_proj``/``k_proj``/``v_proj``/``o_proj``, ``view(bsz, q_len, H, d).transpose(1, 2)``,
a 4-D additive mask ``(B, 1, T, T)`` of ``0`` and the dtype's minimum, added to ``q @ k^T / sqrt(d)``,
``softmax(dim=-1, dtype=float32)``. A window of 3 over T = 6 tokens.

Twin (argument): ``window-plus-one``: the band one key wider. Which width a model was trained with is a
number in its configuration; the trace sees a banded causal mask either way."""

import math
import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("window-plus-one",)
DIMS = ("B=2 T=6 D=32 H=4",)
SLIDING_WINDOW = 3


def sliding_window_causal_mask(bsz, tgt_len, dtype, sliding_window, bug=""):
    if bug == "window-plus-one":
        tensor = torch.full((tgt_len, tgt_len), fill_value=1.0)
        mask = torch.tril(tensor, diagonal=0)
        mask = torch.triu(mask, diagonal=-sliding_window)
        mask = torch.log(mask).to(dtype)
    else:
        mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min)
        mask_cond = torch.arange(mask.size(-1))
        mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
        context_mask = 1 - torch.triu(torch.ones_like(mask, dtype=torch.int), diagonal=1 - sliding_window)
        mask.masked_fill_(context_mask.bool(), torch.finfo(dtype).min)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)            # (B, 1, T, T)


class MistralAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(hidden_size, hidden_size, bias=False) for _ in range(3))
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)   # (B, H, T, T)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()        # (B, T, H, d)
        return self.o_proj(attn_output.reshape(bsz, q_len, -1))


class MistralLayer(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.self_attn = MistralAttention(hidden_size, num_heads)
        self.bug = bug

    def forward(self, hidden_states):
        bsz, seq_len, _ = hidden_states.shape
        mask = sliding_window_causal_mask(bsz, seq_len, hidden_states.dtype, SLIDING_WINDOW, self.bug)
        return hidden_states + self.self_attn(hidden_states, mask)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MistralLayer(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
