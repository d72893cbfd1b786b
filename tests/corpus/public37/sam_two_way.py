"""facebookresearch/segment-anything, segment_anything/modeling/transformer.py (v1.0, ``TwoWayTransformer``,
``TwoWayAttentionBlock``, ``Attention``) and the call in segment_anything/modeling/mask_decoder.py
(``MaskDecoder.predict_masks``: ``torch.repeat_interleave(image_pe, tokens.shape[0], dim=0)``): SAM's two-way
transformer. The prompt tokens attend to themselves, then to the image (token-to-image), an MLP, then the image
attends back to the tokens (image-to-token); the image map ``(B, C, h, w)`` is ``flatten(2).permute(0, 2, 1)``ed; the
positional encodings are added to queries and keys (not values) before every attention; the cross-attentions run
at half width (``downsample_rate=2``: ``internal_dim = C // 2``); ``Attention`` splits heads with
``_separate_heads`` (``reshape(b, n, h, c // h).transpose(1, 2)``) and joins them with ``_recombine_heads``.

Bugs: ``separate-heads-without-transpose``: ``_separate_heads`` written ``reshape(b, h, n, c // h)`` (the natural
slip; tokens and heads mixed in every attention); ``recombine-heads-without-transpose``: ``_recombine_heads``
written ``reshape(b, n_tokens, h * c)`` straight from ``(b, h, n, c)`` (the joining twin of the same slip)."""

import math
import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, embedding_dim, num_heads, downsample_rate=1, bug=""):
        super().__init__()
        self.internal_dim, self.num_heads, self.bug = embedding_dim // downsample_rate, num_heads, bug
        self.q_proj = nn.Linear(embedding_dim, self.internal_dim)
        self.k_proj = nn.Linear(embedding_dim, self.internal_dim)
        self.v_proj = nn.Linear(embedding_dim, self.internal_dim)
        self.out_proj = nn.Linear(self.internal_dim, embedding_dim)

    def _separate_heads(self, x, num_heads):
        b, n, c = x.shape
        if self.bug == "separate-heads-without-transpose":
            return x.reshape(b, num_heads, n, c // num_heads)
        x = x.reshape(b, n, num_heads, c // num_heads)
        return x.transpose(1, 2)  # B x N_heads x N_tokens x C_per_head

    def _recombine_heads(self, x):
        b, n_heads, n_tokens, c_per_head = x.shape
        if self.bug == "recombine-heads-without-transpose":
            return x.reshape(b, n_tokens, n_heads * c_per_head)
        x = x.transpose(1, 2)
        return x.reshape(b, n_tokens, n_heads * c_per_head)  # B x N_tokens x C

    def forward(self, q, k, v):
        q = self._separate_heads(self.q_proj(q), self.num_heads)
        k = self._separate_heads(self.k_proj(k), self.num_heads)
        v = self._separate_heads(self.v_proj(v), self.num_heads)
        _, _, _, c_per_head = q.shape
        attn = q @ k.permute(0, 1, 3, 2)  # B x N_heads x N_tokens x N_tokens
        attn = attn / math.sqrt(c_per_head)
        attn = torch.softmax(attn, dim=-1)
        out = attn @ v
        return self.out_proj(self._recombine_heads(out))


class MLPBlock(nn.Module):
    def __init__(self, embedding_dim, mlp_dim):
        super().__init__()
        self.lin1, self.lin2, self.act = nn.Linear(embedding_dim, mlp_dim), nn.Linear(mlp_dim, embedding_dim), nn.ReLU()

    def forward(self, x):
        return self.lin2(self.act(self.lin1(x)))


class TwoWayAttentionBlock(nn.Module):
    def __init__(self, embedding_dim, num_heads, mlp_dim, downsample_rate=2, skip_first_layer_pe=False, bug=""):
        super().__init__()
        self.self_attn = Attention(embedding_dim, num_heads, bug=bug)
        self.norm1 = nn.LayerNorm(embedding_dim)
        self.cross_attn_token_to_image = Attention(embedding_dim, num_heads, downsample_rate, bug=bug)
        self.norm2 = nn.LayerNorm(embedding_dim)
        self.mlp = MLPBlock(embedding_dim, mlp_dim)
        self.norm3 = nn.LayerNorm(embedding_dim)
        self.norm4 = nn.LayerNorm(embedding_dim)
        self.cross_attn_image_to_token = Attention(embedding_dim, num_heads, downsample_rate, bug=bug)
        self.skip_first_layer_pe = skip_first_layer_pe

    def forward(self, queries, keys, query_pe, key_pe):
        if self.skip_first_layer_pe:
            queries = self.self_attn(q=queries, k=queries, v=queries)
        else:
            q = queries + query_pe
            queries = queries + self.self_attn(q=q, k=q, v=queries)
        queries = self.norm1(queries)
        q, k = queries + query_pe, keys + key_pe
        queries = self.norm2(queries + self.cross_attn_token_to_image(q=q, k=k, v=keys))
        queries = self.norm3(queries + self.mlp(queries))
        q, k = queries + query_pe, keys + key_pe
        keys = self.norm4(keys + self.cross_attn_image_to_token(q=k, k=q, v=queries))
        return queries, keys


class TwoWayTransformer(nn.Module):
    def __init__(self, depth, embedding_dim, num_heads, mlp_dim, bug=""):
        super().__init__()
        self.layers = nn.ModuleList(
            TwoWayAttentionBlock(embedding_dim, num_heads, mlp_dim, skip_first_layer_pe=(i == 0), bug=bug)
            for i in range(depth))
        self.final_attn_token_to_image = Attention(embedding_dim, num_heads, downsample_rate=2, bug=bug)
        self.norm_final_attn = nn.LayerNorm(embedding_dim)

    def forward(self, image_embedding, image_pe, point_embedding):
        bs, c, h, w = image_embedding.shape
        image_embedding = image_embedding.flatten(2).permute(0, 2, 1)
        image_pe = image_pe.flatten(2).permute(0, 2, 1)
        queries, keys = point_embedding, image_embedding
        for layer in self.layers:
            queries, keys = layer(queries=queries, keys=keys, query_pe=point_embedding, key_pe=image_pe)
        q, k = queries + point_embedding, keys + image_pe
        queries = self.norm_final_attn(queries + self.final_attn_token_to_image(q=q, k=k, v=keys))
        return queries, keys


class MaskDecoderCore(nn.Module):
    """What ``MaskDecoder.predict_masks`` does around the transformer: one positional map for the batch."""

    def __init__(self, D, H, bug=""):
        super().__init__()
        self.transformer = TwoWayTransformer(2, D, H, 2 * D, bug=bug)

    def forward(self, image_embeddings, image_pe, tokens):
        src = image_embeddings
        pos_src = torch.repeat_interleave(image_pe, tokens.shape[0], dim=0)
        hs, src = self.transformer(src, pos_src, tokens)
        return hs, src


BUGS = ("separate-heads-without-transpose", "recombine-heads-without-transpose")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4 Hp=3 Wp=4",)
EQUAL = {"B=2 T=5 D=32 H=4 Hp=3 Wp=4": "B=4 T=4 D=32 H=4 Hp=2 Wp=2"}


def build(bug="", B=2, T=5, D=32, H=4, Hp=3, Wp=4):
    torch.manual_seed(0)
    inputs = (torch.randn(B, D, Hp, Wp), torch.randn(1, D, Hp, Wp), torch.randn(B, T, D))
    return MaskDecoderCore(D, H, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
