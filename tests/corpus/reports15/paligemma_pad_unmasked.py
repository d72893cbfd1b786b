"""huggingface/transformers issue #35855 ("Paliegemma Pad Token not Masked"): in v4.48 PaliGemma's
``_update_causal_mask`` applied the padding mask first and then, while training, opened the prefix's columns
with ``masked_fill(token_type_ids[:, None, None, :] == 0, 0)``; the pad tokens have ``token_type_ids`` 0 as
well, so the second step unmasked the padded keys again ("the order in which the pad tokens are masked has been
reversed"; v4.43 opened the prefix first and masked the padding after). The fix restores that order.

The idiom: PaliGemma's mask (``full((T, T), min_dtype)``, ``triu(1)``, ``arange(T) > cache_position[:, None]``,
``[None, None].expand(B, 1, -1, -1)``, ``clone()``, the padding mask ``causal_mask + attention_mask[:, None,
None, :] == 0`` filled with ``min_dtype``, the prefix opened where ``token_type_ids == 0``) over image tokens
joined before the text, one Gemma-style attention layer (``view(B, T, H, d).transpose(1, 2)``, the additive
mask added to the scores, ``softmax(-1, dtype=float32)``); training form: image and prompt token type 0, the
suffix 1, the second row right-padded by two (token type 0 on the pads, as the processor gives).

Bug (argument): ``open-prefix-after-padding``: the prefix opened after the padding was masked."""

import sys

import torch
from torch import nn

BUGS = ("open-prefix-after-padding",)
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)


class PaliGemmaLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.multi_modal_projector = nn.Linear(dim, dim)
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def update_causal_mask(self, attention_mask, token_type_ids, dtype):     # (B, T), (B, T)
        min_dtype = torch.finfo(dtype).min
        bsz, seq = attention_mask.shape
        cache_position = torch.arange(seq)
        causal_mask = torch.full((seq, seq), min_dtype, dtype=dtype).triu(1)
        causal_mask = causal_mask * (torch.arange(seq) > cache_position.reshape(-1, 1))
        causal_mask = causal_mask[None, None, :, :].expand(bsz, 1, -1, -1).clone()   # (B, 1, T, T)
        prefix = token_type_ids[:, None, None, :] == 0
        if self.bug != "open-prefix-after-padding":
            causal_mask = causal_mask.masked_fill(prefix, 0)                         # [open]
        padding_mask = (causal_mask + attention_mask[:, None, None, :]) == 0
        causal_mask = causal_mask.masked_fill(padding_mask, min_dtype)              # [pad]
        if self.bug == "open-prefix-after-padding":
            causal_mask = causal_mask.masked_fill(prefix, 0)                         # [open]
        return causal_mask

    def forward(self, image_features, text_embeds, attention_mask, token_type_ids):   # (B, N, D), (B, T-N, D)
        hidden = torch.cat([self.multi_modal_projector(image_features), text_embeds], dim=1)    # (B, T, D)
        bsz, seq, _ = hidden.shape
        mask = self.update_causal_mask(attention_mask, token_type_ids, hidden.dtype)
        q, k, v = (p(hidden).view(bsz, seq, self.heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5 + mask
        weights = scores.softmax(dim=-1, dtype=torch.float32)
        return self.o_proj(torch.matmul(weights, v).transpose(1, 2).reshape(bsz, seq, -1))


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    n_image, n_prompt = 2, 2
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, -2:] = 0                                                  # the second row right-padded by two
    token_type_ids = torch.ones(B, T, dtype=torch.long)
    token_type_ids[:, :n_image + n_prompt] = 0
    token_type_ids[1, -2:] = 0                                                  # the pads' token type 0
    inputs = (torch.randn(B, n_image, D), torch.randn(B, T - n_image, D), attention_mask, token_type_ids)
    return PaliGemmaLayer(D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
