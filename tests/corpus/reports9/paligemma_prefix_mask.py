"""huggingface/transformers PR #30918 ("PaliGemma fix attention mask for finetunes"; the fix merged as PR #30967,
"Paligemma causal attention mask"): PaliGemma's language model received a 4-D attention mask built from the
padding mask alone, all ones over the real tokens, which pre-empted Gemma's own causal mask: while fine-tuning,
the suffix (the tokens the loss is computed on) saw its own future, a label leak. PaliGemma attends fully over
the image tokens and the text prefix and causally over the suffix; the fix builds the causal mask and opens
the prefix's columns with ``token_type_ids == 0``.

The idiom: image tokens (a ``Linear`` projection of patch features) joined before the text embeddings, one
Gemma-style attention layer (``view(B, T, H, d).transpose(1, 2)``, the additive mask ``[B, 1, T, T]`` of 0 and
``finfo.min``, ``softmax(-1, dtype=float32)``), ``token_type_ids`` 0 over image and prefix, 1 over the suffix.
The image has 2 tokens and the text T - 2, of which the first 2 are the prompt.

Bug (argument): ``padding-mask-only``: the 4-D mask from the padding mask, no causal part."""

import sys

import torch
from torch import nn

BUGS = ("padding-mask-only",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class GemmaAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, hidden, mask):
        b, t, _ = hidden.shape
        shape = (b, t, self.heads, self.head_dim)
        q = self.q_proj(hidden).view(shape).transpose(1, 2)                             # (B, H, T, d)
        k = self.k_proj(hidden).view(shape).transpose(1, 2)
        v = self.v_proj(hidden).view(shape).transpose(1, 2)
        w = q @ k.transpose(2, 3) * self.head_dim ** -0.5 + mask                       # (B, H, T, T)
        w = w.softmax(dim=-1, dtype=torch.float32).to(q.dtype)
        out = (w @ v).transpose(1, 2).reshape(b, t, -1)                                 # (B, T, D)
        return self.o_proj(out)


class PaliGemma(nn.Module):
    def __init__(self, dim, heads, patch_dim=12, bug=""):
        super().__init__()
        self.bug = bug
        self.projector = nn.Linear(patch_dim, dim)
        self.attn = GemmaAttention(dim, heads)

    def causal_mask(self, attention_mask, token_type_ids, dtype):
        b, t = attention_mask.shape
        min_value = torch.finfo(dtype).min
        if self.bug == "padding-mask-only":
            return (1.0 - attention_mask[:, None, None, :].to(dtype)).expand(b, 1, t, t) * min_value
        mask = torch.full((t, t), min_value, dtype=dtype).triu(diagonal=1)             # (T, T)
        mask = mask[None, None].expand(b, 1, t, t).clone()                              # (B, 1, T, T)
        mask = mask.masked_fill(token_type_ids[:, None, None, :] == 0, 0)              # the prefix: both ways
        return mask.masked_fill(attention_mask[:, None, None, :] == 0, min_value)

    def forward(self, patches, text_embeds, attention_mask, token_type_ids):
        image = self.projector(patches)                                                 # (B, I, D)
        hidden = torch.cat([image, text_embeds], dim=1)                                 # (B, T, D)
        mask = self.causal_mask(attention_mask, token_type_ids, hidden.dtype)
        return self.attn(hidden, mask)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    image_tokens, prefix = 2, 2
    token_type_ids = (torch.arange(T) >= image_tokens + prefix).long().expand(B, T)    # 0: image + prompt
    attention_mask = torch.ones(B, T, dtype=torch.long)
    inputs = (torch.randn(B, image_tokens, 12), torch.randn(B, T - image_tokens, D), attention_mask, token_type_ids)
    return PaliGemma(D, H, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
