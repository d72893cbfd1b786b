"""huggingface/transformers, src/transformers/models/grounding_dino/modeling_grounding_dino.py (v4.40,
``GroundingDinoBiMultiHeadAttention``, ``GroundingDinoFusionLayer``): the encoder's image-text fusion. Vision
features ``(B, T, D)`` (the flattened feature map) and text features ``(B, S, D)`` are each projected; one product
``bmm(vision_q, text_k.transpose(1, 2))`` over ``(B * H, T, S)`` serves both directions: the vision side softmaxes it
over the text tokens (the text padding mask, ``text_attention_mask[:, None, None, :].repeat(1, H, 1, 1).flatten(0,
1)``, filled with ``-inf`` first), the text side takes its ``transpose(1, 2)``, subtracts its row max, and softmaxes
over the vision tokens; each side's ``bmm`` with the other's values, ``view(B, H, L, d).transpose(1, 2).reshape(B,
L, D)``, an output projection, and a layer-scaled residual (``gamma_v``, ``gamma_l``). The padding mask enters as
Grounding DINO's fusion layer receives it: ``~text_attention_mask`` (True where padded).

Bugs: ``mask-repeat-head-major``: the text mask tiled with ``repeat(H, 1, 1, 1)`` before ``flatten(0, 1)`` (the
rows ``(h, b)`` where the weights' rows are ``(b, h)``: each head gets another sample's padding; the repeat vs
repeat_interleave slip that recurs in ``B * H`` layouts); ``text-softmax-over-text``: the text side's softmax taken
over ``dim=1`` of its transposed weights (over the text tokens, each vision token's column normalised, instead of
each text token's row over the vision tokens)."""

import sys

import torch
from torch import nn


class GroundingDinoBiMultiHeadAttention(nn.Module):
    def __init__(self, vision_dim, text_dim, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scale = self.head_dim ** (-0.5)
        self.vision_proj, self.text_proj = nn.Linear(vision_dim, embed_dim), nn.Linear(text_dim, embed_dim)
        self.values_vision_proj = nn.Linear(vision_dim, embed_dim)
        self.values_text_proj = nn.Linear(text_dim, embed_dim)
        self.out_vision_proj, self.out_text_proj = nn.Linear(embed_dim, vision_dim), nn.Linear(embed_dim, text_dim)

    def _reshape(self, tensor, seq_len, batch_size):
        return tensor.view(batch_size, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, vision_features, text_features, text_attention_mask=None):
        batch_size, tgt_len, _ = vision_features.size()
        vision_query_states = self._reshape(self.vision_proj(vision_features) * self.scale, tgt_len, batch_size)
        text_key_states = self._reshape(self.text_proj(text_features), -1, batch_size)
        vision_value_states = self._reshape(self.values_vision_proj(vision_features), -1, batch_size)
        text_value_states = self._reshape(self.values_text_proj(text_features), -1, batch_size)

        proj_shape = (batch_size * self.num_heads, -1, self.head_dim)
        vision_query_states = vision_query_states.view(*proj_shape)
        text_key_states = text_key_states.view(*proj_shape)
        vision_value_states = vision_value_states.view(*proj_shape)
        text_value_states = text_value_states.view(*proj_shape)
        src_len = text_key_states.size(1)

        attn_weights = torch.bmm(vision_query_states, text_key_states.transpose(1, 2))   # (B*H, T, S)
        attn_weights = attn_weights - attn_weights.max()
        attn_weights = torch.clamp(attn_weights, min=-50000, max=50000)
        attn_weights_transposed = attn_weights.transpose(1, 2)                          # (B*H, S, T)
        text_attn_weights = attn_weights_transposed - torch.max(attn_weights_transposed, dim=-1, keepdim=True)[0]
        text_attn_weights = torch.clamp(text_attn_weights, min=-50000, max=50000)
        text_attn_weights = text_attn_weights.softmax(dim=1 if self.bug == "text-softmax-over-text" else -1)

        if text_attention_mask is not None:
            if self.bug == "mask-repeat-head-major":
                text_attention_mask = text_attention_mask[:, None, None, :].repeat(self.num_heads, 1, 1, 1)
            else:
                text_attention_mask = text_attention_mask[:, None, None, :].repeat(1, self.num_heads, 1, 1)
            text_attention_mask = text_attention_mask.flatten(0, 1)
            attn_weights = attn_weights.masked_fill(text_attention_mask, float("-inf"))
        vision_attn_weights = attn_weights.softmax(dim=-1)

        vision_attn_output = torch.bmm(vision_attn_weights, text_value_states)          # (B*H, T, d)
        text_attn_output = torch.bmm(text_attn_weights, vision_value_states)            # (B*H, S, d)
        vision_attn_output = vision_attn_output.view(batch_size, self.num_heads, tgt_len, self.head_dim)
        vision_attn_output = vision_attn_output.transpose(1, 2).reshape(batch_size, tgt_len, self.embed_dim)
        text_attn_output = text_attn_output.view(batch_size, self.num_heads, src_len, self.head_dim)
        text_attn_output = text_attn_output.transpose(1, 2).reshape(batch_size, src_len, self.embed_dim)
        return self.out_vision_proj(vision_attn_output), self.out_text_proj(text_attn_output)


class GroundingDinoFusionLayer(nn.Module):
    def __init__(self, dim, heads, bug="", init_values=1e-4):
        super().__init__()
        self.layer_norm_vision, self.layer_norm_text = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = GroundingDinoBiMultiHeadAttention(dim, dim, dim, heads, bug)
        self.vision_param = nn.Parameter(init_values * torch.ones(dim))
        self.text_param = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, vision_features, text_features, attention_mask_text):
        vision_features = self.layer_norm_vision(vision_features)
        text_features = self.layer_norm_text(text_features)
        delta_v, delta_t = self.attn(vision_features, text_features, text_attention_mask=attention_mask_text)
        return vision_features + self.vision_param * delta_v, text_features + self.text_param * delta_t


class FusionModel(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.fusion_layer = GroundingDinoFusionLayer(dim, heads, bug)

    def forward(self, vision_features, text_features, text_attention_mask):
        return self.fusion_layer(vision_features, text_features, ~text_attention_mask)


BUGS = ("mask-repeat-head-major", "text-softmax-over-text")
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    torch.manual_seed(0)
    text_attention_mask = torch.ones(B, S, dtype=torch.bool)
    text_attention_mask[0, S - 2:] = False                                        # the first caption is shorter
    return FusionModel(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, S, D), text_attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
