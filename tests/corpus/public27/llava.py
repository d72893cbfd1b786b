"""huggingface/transformers, src/transformers/models/llava/modeling_llava.py (v4.46, ``LlavaMultiModalProjector``,
``LlavaForConditionalGeneration.get_image_features`` and the splice in ``forward``): a vision tower (here one conv
patch embedding, ``flatten(2).transpose(1, 2)``, and one pre-LN encoder block) whose patch features, without the
CLS token (``vision_feature_select_strategy="default"``: ``[:, 1:]``), go through the projector (``linear_1``, GELU,
``linear_2``) and are spliced into the text embeddings at the image token: ``special_image_mask = (input_ids ==
image_token_index).unsqueeze(-1).expand_as(inputs_embeds)``, ``inputs_embeds.masked_scatter(special_image_mask,
image_features)``; then one Llama-style causal self-attention layer over the joint sequence.

The text ids hold ``P`` image tokens (one per patch) after a short prompt, so the joint sequence has T tokens.

Bugs: ``features-channels-first``: the patch embedding's ``flatten(2)`` kept without ``transpose(1, 2)`` and read as
``(B, D_v, P)`` (the slip of ports of the CLIP tower: ``masked_scatter`` only needs the element count, so the
channels are scattered across the image tokens); ``causal-mask-transposed``: the causal mask written ``.T``
(``triu(1).transpose(-1, -2)``: every token reads only itself and the tokens after it)."""

import sys

import torch
from torch import nn


class TinyVisionTower(nn.Module):
    def __init__(self, vision_dim, heads, patch=4, bug=""):
        super().__init__()
        self.bug, self.heads = bug, heads
        self.patch_embedding = nn.Conv2d(3, vision_dim, patch, stride=patch)
        self.class_embedding = nn.Parameter(torch.randn(vision_dim))
        self.layer_norm1 = nn.LayerNorm(vision_dim)
        self.qkv = nn.Linear(vision_dim, 3 * vision_dim)
        self.out_proj = nn.Linear(vision_dim, vision_dim)

    def forward(self, pixel_values):                                     # (B, 3, h, w)
        patches = self.patch_embedding(pixel_values).flatten(2)          # (B, D_v, P)
        if self.bug == "features-channels-first":
            patches = patches.reshape(patches.shape[0], patches.shape[2], patches.shape[1])
        else:
            patches = patches.transpose(1, 2)                            # (B, P, D_v)
        cls = self.class_embedding.expand(patches.shape[0], 1, -1)
        x = torch.cat([cls, patches], dim=1)                             # (B, 1 + P, D_v)
        b, n, c = x.shape
        qkv = self.qkv(self.layer_norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        out = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, c)
        return x + self.out_proj(out)


class LlavaMultiModalProjector(nn.Module):
    def __init__(self, vision_dim, text_dim):
        super().__init__()
        self.linear_1 = nn.Linear(vision_dim, text_dim)
        self.linear_2 = nn.Linear(text_dim, text_dim)

    def forward(self, image_features):
        return self.linear_2(nn.functional.gelu(self.linear_1(image_features)))


class LlamaSelfAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        bsz, q_len, _ = x.shape
        shape = (bsz, q_len, self.heads, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        mask = torch.full((q_len, q_len), torch.finfo(x.dtype).min).triu(1)
        if self.bug == "causal-mask-transposed":
            mask = mask.transpose(-1, -2)
        scores = torch.matmul(q, k.transpose(2, 3)) / self.head_dim ** 0.5 + mask[None, None]
        out = torch.matmul(scores.softmax(dim=-1), v)
        return self.o_proj(out.transpose(1, 2).reshape(bsz, q_len, -1))


class LlavaForConditionalGeneration(nn.Module):
    def __init__(self, dim, heads, vision_dim, bug="", vocab=40, image_token_index=39):
        super().__init__()
        self.image_token_index = image_token_index
        self.vision_tower = TinyVisionTower(vision_dim, heads, bug=bug)
        self.multi_modal_projector = LlavaMultiModalProjector(vision_dim, dim)
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.input_layernorm = nn.LayerNorm(dim)
        self.self_attn = LlamaSelfAttention(dim, heads, bug)

    def get_image_features(self, pixel_values):
        image_outputs = self.vision_tower(pixel_values)
        selected_image_feature = image_outputs[:, 1:]                    # "default": drop the CLS token
        return self.multi_modal_projector(selected_image_feature)

    def forward(self, input_ids, pixel_values):                          # (B, T), (B, 3, h, w)
        inputs_embeds = self.embed_tokens(input_ids)
        image_features = self.get_image_features(pixel_values)
        special_image_mask = (input_ids == self.image_token_index).unsqueeze(-1).expand_as(inputs_embeds)
        image_features = image_features.to(inputs_embeds.dtype)
        inputs_embeds = inputs_embeds.masked_scatter(special_image_mask, image_features)
        return inputs_embeds + self.self_attn(self.input_layernorm(inputs_embeds))


BUGS = ("features-channels-first", "causal-mask-transposed")
TWINS = ()
DIMS = ("B=2 T=10 D=32 H=4 P=4 D_v=24",)
EQUAL = {DIMS[0]: "B=4 T=8 D=32 H=4 P=4 D_v=24"}


def build(bug="", B=2, T=10, D=32, H=4, P=4, D_v=24):
    torch.manual_seed(0)
    side = int(P ** 0.5)
    input_ids = torch.randint(1, 39, (B, T))
    input_ids[:, 2:2 + P] = 39                                           # the image tokens after a 2-token prompt
    pixel_values = torch.randn(B, 3, 4 * side, 4 * side)
    return LlavaForConditionalGeneration(D, H, D_v, bug).eval(), (input_ids, pixel_values)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
