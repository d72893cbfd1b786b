"""huggingface/transformers issue #38053, fixed by PR #38080 ("[gemma3] fix bidirectional attention mask",
merged): Gemma 3 lets the tokens of an image attend to each other both ways, on top of the causal mask, but
the mask unmasked every image token for every other image token (``is_image[:, None, :] & is_image[:, :,
None]``), so the first image's tokens also read the *later* images' tokens: "images cannot attend to future
images, but in the current implementation we unmask attention within all images". The fix gives each image
a group id (a ``cumsum`` over the image starts) and unmasks only tokens of the same group.

The idiom: transformers' Gemma 3 text attention (``q_proj``/``k_proj``/``v_proj``/``o_proj``,
``view(B, T, -1, head_dim).transpose(1, 2)``, ``query_pre_attn_scalar ** -0.5``, an additive 4-D mask
``(B, 1, T, T)``, ``softmax`` in float32), the mask built from ``token_type_ids`` (1 on image tokens) by
``token_type_ids_mask_function``-style code: causal, or-ed with the image blocks. Two images of two tokens
each sit among text tokens (``[text, img, img, text, img, img]`` at T = 6).

Bug (argument): ``all-images-bidirectional``: every image token unmasked for every other image token."""

import sys

import torch
from torch import nn

BUGS = ("all-images-bidirectional",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def image_blocks(token_type_ids, bug=""):                                      # (B, T) -> (B, T, T) bool
    is_image = token_type_ids == 1
    if bug == "all-images-bidirectional":
        return is_image[:, :, None] & is_image[:, None, :]                     # [mask]
    padded = nn.functional.pad(is_image, (1, 0), value=0)
    new_image_start = is_image & ~padded[:, :-1]
    image_group_id = torch.cumsum(new_image_start.int(), dim=1) - 1            # (B, T)
    group = torch.where(is_image, image_group_id, torch.full_like(token_type_ids, -1))
    return (group[:, :, None] == group[:, None, :]) & (group[:, None, :] != -1)  # [mask]


def create_causal_mask(token_type_ids, dtype, bug=""):
    b, t = token_type_ids.shape
    allowed = torch.ones(t, t, dtype=torch.bool).tril()[None] | image_blocks(token_type_ids, bug)
    return torch.zeros(b, 1, t, t, dtype=dtype).masked_fill(~allowed[:, None], torch.finfo(dtype).min)


class Gemma3Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.head_dim, self.scaling = dim // heads, (dim // heads) ** -0.5
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, hidden_states, attention_mask):                           # (B, T, D), (B, 1, T, T)
        b, t, _ = hidden_states.shape
        shape = (b, t, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)             # (B, H, T, d)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling + attention_mask  # (B, H, T, T)
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).reshape(b, t, -1)              # (B, T, D)
        return self.o_proj(out)


class Gemma3Model(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug, self.self_attn = bug, Gemma3Attention(dim, heads)

    def forward(self, inputs_embeds, token_type_ids):
        mask = create_causal_mask(token_type_ids, inputs_embeds.dtype, self.bug)
        return self.self_attn(inputs_embeds, mask)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    token_type_ids = torch.tensor([0, 1, 1, 0, 1, 1] * (T // 6 + 1))[:T].expand(B, T)
    return Gemma3Model(D, H, bug).eval(), (torch.randn(B, T, D), token_type_ids)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
