"""huggingface/transformers, src/transformers/models/vilt/modeling_vilt.py (v4.46, ``ViltEmbeddings``,
``TextEmbeddings``, ``ViltPatchEmbeddings``, ``ViltSelfAttention``, ``ViltLayer``): ViLT's single-stream
vision-and-language transformer. Text: word + position + token type (0) embeddings; image: a ``Conv2d`` patch
projection, the ``pixel_mask`` ``interpolate``d to the patch grid, ``flatten(2).transpose(1, 2)``, a ``[CLS]``
patch prepended, position embeddings (sliced to the grid, no interpolation here) and token type (1); the two are
``cat``ed along tokens, text first, and so are their masks (the image's ``[CLS]`` always seen). A pre-norm ViT layer
over the joint sequence: ``transpose_for_scores`` (``view(B, N, H, d).permute(0, 2, 1, 3)``), ``q kᵀ / sqrt(d)`` plus
the extended mask ``(1 - mask[:, None, None, :]) · -10000``, ``softmax(-1)``, ``permute(0, 2, 1, 3).view(B, N, D)``.

Bugs: ``patch-view-without-transpose``: the patch embeddings ``(B, D, Hp, Wp)`` ``view(B, -1, D)``ed instead of
``flatten(2).transpose(1, 2)`` (features and patches mixed); ``mask-cat-image-first``: the masks ``cat``ed image
first, ``cat([image_masks, text_masks])``, while the embeddings are text first (each position's padding read from
another position: the text's padding lands on image patches)."""

import math
import sys

import torch
from torch import nn


class ViltSelfAttention(nn.Module):
    def __init__(self, hidden_size, heads):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = heads, hidden_size // heads
        self.all_head_size = hidden_size
        self.query, self.key = nn.Linear(hidden_size, hidden_size), nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(*new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size) + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        return context_layer.view(*context_layer.size()[:-2], self.all_head_size)


class ViltLayer(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.layernorm_before, self.layernorm_after = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attention, self.output = ViltSelfAttention(D, H), nn.Linear(D, D)
        self.intermediate, self.mlp_out = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)

    def forward(self, hidden_states, attention_mask):
        attention_output = self.attention(self.layernorm_before(hidden_states), attention_mask)
        hidden_states = self.output(attention_output) + hidden_states
        return self.mlp_out(nn.functional.gelu(self.intermediate(self.layernorm_after(hidden_states)))) + hidden_states


class ViltModel(nn.Module):
    def __init__(self, vocab, D, H, patch_size=4, max_grid=8, bug=""):
        super().__init__()
        self.word_embeddings, self.position_embeddings = nn.Embedding(vocab, D), nn.Embedding(16, D)
        self.token_type_embeddings, self.text_norm = nn.Embedding(2, D), nn.LayerNorm(D)
        self.patch_size, self.bug = patch_size, bug
        self.projection = nn.Conv2d(3, D, kernel_size=patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.randn(1, 1, D) * 0.02)
        self.patch_position_embeddings = nn.Parameter(torch.randn(1, max_grid * max_grid + 1, D) * 0.02)
        self.layers = nn.ModuleList([ViltLayer(D, H) for _ in range(2)])
        self.layernorm = nn.LayerNorm(D)

    def visual_embed(self, pixel_values, pixel_mask):
        x = self.projection(pixel_values)
        batch_size, dim, ph, pw = x.shape
        x_mask = pixel_mask[:, None, :, :].float()
        x_mask = nn.functional.interpolate(x_mask, size=(ph, pw)).long()
        if self.bug == "patch-view-without-transpose":
            x = x.view(batch_size, -1, dim)
        else:
            x = x.flatten(2).transpose(1, 2)
        x_mask = x_mask.flatten(1)
        x = torch.cat([self.cls_token.expand(batch_size, -1, -1), x], dim=1)
        x = x + self.patch_position_embeddings[:, : ph * pw + 1, :]
        x_mask = torch.cat([torch.ones(batch_size, 1, dtype=x_mask.dtype), x_mask], dim=1)
        return x, x_mask

    def forward(self, input_ids, attention_mask, pixel_values, pixel_mask):
        position_ids = torch.arange(input_ids.shape[1]).unsqueeze(0)
        text_embeds = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        text_embeds = self.text_norm(text_embeds + self.token_type_embeddings(torch.zeros_like(input_ids)))
        image_embeds, image_masks = self.visual_embed(pixel_values, pixel_mask)
        image_embeds = image_embeds + self.token_type_embeddings(torch.ones_like(image_masks))
        embeddings = torch.cat([text_embeds, image_embeds], dim=1)
        if self.bug == "mask-cat-image-first":
            masks = torch.cat([image_masks, attention_mask], dim=1)
        else:
            masks = torch.cat([attention_mask, image_masks], dim=1)
        extended = (1.0 - masks[:, None, None, :].to(embeddings.dtype)) * -10000.0
        hidden_states = embeddings
        for layer in self.layers:
            hidden_states = layer(hidden_states, extended)
        return self.layernorm(hidden_states)


BUGS = ("patch-view-without-transpose", "mask-cat-image-first")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 T=6 D=32 H=4 Hp=3 Wp=5": "B=4 T=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, T=6, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    input_ids = torch.randint(0, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, -2:] = 0                                               # entry 1's text right-padded
    pixel_values = torch.randn(B, 3, 4 * Hp, 4 * Wp)
    pixel_mask = torch.ones(B, 4 * Hp, 4 * Wp, dtype=torch.long)
    pixel_mask[1, :, -4:] = 0                                                # entry 1's image padded on the right
    return ViltModel(40, D, H, bug=bug).eval(), (input_ids, attention_mask, pixel_values, pixel_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
