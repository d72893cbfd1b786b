"""huggingface/sentence-transformers pull request #3598 ("Support excluding prompt tokens with pooling with
left-padding tokenizer"): ``Pooling.forward`` with ``include_prompt=False`` dropped the prompt from the mean by
zeroing the mask's first columns, ``attention_mask[:, :prompt_length] = 0``, which assumed right padding: with a
left-padding tokenizer (a decoder embedding model such as plamo-embedding) a padded row starts with its pads, so
the zeroed columns were pads (already 0) and the prompt's tokens stayed in the mean. The fix offsets each row by
its pad count, ``pad_lengths = attention_mask.argmax(dim=1)``, and zeroes ``attention_mask[i, :pad + prompt]``.

The idiom: a decoder embedding model's last layer (``q_proj/k_proj/v_proj``, ``view(B, T, H, d).transpose(1,
2)``, a causal mask and the left-padding mask added as ``finfo.min``, ``softmax(-1, dtype=float32)``, merge,
``o_proj``), then sentence-transformers' mean pooling, ``sum(token_embeddings * mask[..., None], 1) /
mask.sum(1)[..., None].clamp(min=1e-9)``; the prompt is 2 tokens, the second row left-padded by two.

Bug (argument): ``prompt-first-columns``: the prompt excluded as ``attention_mask[:, :prompt_length] = 0``."""

import sys

import torch
from torch import nn

BUGS = ("prompt-first-columns",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
PROMPT_LENGTH = 2


class DecoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def forward(self, hidden_states, attention_mask):                      # (B, T, D), (B, T) of 1/0
        bsz, q_len, _ = hidden_states.shape
        shape = (bsz, q_len, self.heads, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        min_value = torch.finfo(hidden_states.dtype).min
        causal = torch.full((q_len, q_len), min_value).triu(1)
        padding = (1.0 - attention_mask[:, None, None, :].float()) * min_value
        scores = q @ k.transpose(2, 3) / self.head_dim ** 0.5 + causal + padding
        weights = scores.softmax(dim=-1, dtype=torch.float32)
        out = (weights @ v).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out) + hidden_states


class PromptlessMeanPooling(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.layer, self.bug = DecoderLayer(dim, heads), bug

    def forward(self, hidden_states, attention_mask):
        token_embeddings = self.layer(hidden_states, attention_mask)
        attention_mask = attention_mask.clone()
        if self.bug == "prompt-first-columns":
            attention_mask[:, :PROMPT_LENGTH] = 0                               # [prompt]
        else:
            pad_lengths = attention_mask.to(torch.int32).argmax(dim=1)
            for i, length in enumerate(pad_lengths + PROMPT_LENGTH):
                attention_mask[i, :length] = 0                                  # [prompt]
        mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
        summed = torch.sum(token_embeddings * mask, 1)
        return summed / mask.sum(1).clamp(min=1e-9)                             # (B, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, :2] = 0                                                   # the second row left-padded by two
    return PromptlessMeanPooling(D, H, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
