"""huggingface/diffusers issue #9813 ("`prepare_ip_adapter_image_embeds` Bug Causes Feature Mixing During Batch
Processing in IP-Adapter", open; a maintainer: "Thanks for the extremely well-written issue"; the fix proposed in
pull request #13959): the pipelines called ``prepare_ip_adapter_image_embeds`` with ``batch_size *
num_images_per_prompt`` where ``num_images_per_prompt`` was meant, so image embeddings that already had one row
per prompt were repeated once per prompt again, ``(B * B, N, D)``; the U-Net's ``IPAdapterAttnProcessor2_0``
then viewed the projected image keys ``view(batch_size, -1, heads, head_dim)`` and, instead of failing, folded
the extra copies into the token axis: each latent attends to the image tokens of every prompt in the batch
(PR #13959: "the redundant tensors were quietly appended along the sequence length dimension, causing
cross-batch feature blending").

The idiom (a Stable Diffusion U-Net's ``Transformer2DModel`` block with the IP-Adapter processor on its
cross-attention): ``GroupNorm``, the latent ``(B, C, h, w)`` permuted and reshaped to ``(B, h*w, C)``,
``proj_in``; ``attn1`` (self-attention), ``attn2`` (cross-attention to the text states plus the decoupled
image cross-attention: ``to_k_ip``/``to_v_ip``, ``F.scaled_dot_product_attention`` for each, the image branch
added with ``scale``), the feed-forward, ``proj_out``, reshaped back to ``(B, C, h, w)`` with the residual; the
image embeddings go through ``prepare_ip_adapter_image_embeds`` (``torch.cat([embeds] * n, dim=0)``) inside
the forward, as the pipeline runs it before each call.

Bug (batch fold): ``embeds-repeated-per-batch``: the image embeddings repeated ``batch_size`` times more."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("embeds-repeated-per-batch",)
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5 S=7 N=4",)
IP_SCALE = 0.6


def prepare_ip_adapter_image_embeds(image_embeds, num_images_per_prompt):
    return torch.cat([image_embeds] * num_images_per_prompt, dim=0)                # (n B, N, D)


class Attention(nn.Module):
    def __init__(self, query_dim, heads, cross_attention_dim=None, ip_adapter=False):
        super().__init__()
        self.heads = heads
        context_dim = cross_attention_dim or query_dim
        self.to_q = nn.Linear(query_dim, query_dim, bias=False)
        self.to_k = nn.Linear(context_dim, query_dim, bias=False)
        self.to_v = nn.Linear(context_dim, query_dim, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(query_dim, query_dim)])
        if ip_adapter:
            self.to_k_ip = nn.Linear(context_dim, query_dim, bias=False)
            self.to_v_ip = nn.Linear(context_dim, query_dim, bias=False)

    def forward(self, hidden_states, encoder_hidden_states=None, ip_hidden_states=None):
        batch_size, _, _ = hidden_states.shape
        context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        query = self.to_q(hidden_states)
        key = self.to_k(context)
        value = self.to_v(context)
        inner_dim = key.shape[-1]
        head_dim = inner_dim // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)         # (B, H, T, d_k)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)             # (B, H, S, d_k)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)         # (B, H, S, d_k)
        out = F.scaled_dot_product_attention(query, key, value, dropout_p=0.0, is_causal=False)
        out = out.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)         # (B, T, D)
        if ip_hidden_states is not None:
            ip_key = self.to_k_ip(ip_hidden_states)
            ip_value = self.to_v_ip(ip_hidden_states)
            ip_key = ip_key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)         # (B, H, N, d_k)
            ip_value = ip_value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)     # (B, H, N, d_k)
            ip_out = F.scaled_dot_product_attention(query, ip_key, ip_value, dropout_p=0.0, is_causal=False)
            ip_out = ip_out.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)   # (B, T, D)
            out = out + IP_SCALE * ip_out
        return self.to_out[0](out)


class BasicTransformerBlock(nn.Module):
    def __init__(self, dim, heads, cross_dim):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads)
        self.attn2 = Attention(dim, heads, cross_attention_dim=cross_dim, ip_adapter=True)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, hidden_states, encoder_hidden_states, ip_hidden_states):
        hidden_states = self.attn1(self.norm1(hidden_states)) + hidden_states
        hidden_states = self.attn2(self.norm2(hidden_states), encoder_hidden_states, ip_hidden_states) + hidden_states
        return self.ff(self.norm3(hidden_states)) + hidden_states


class Transformer2DModel(nn.Module):
    def __init__(self, channels, heads, cross_dim, bug=""):
        super().__init__()
        self.bug = bug
        self.norm = nn.GroupNorm(8, channels, eps=1e-6)
        self.proj_in = nn.Linear(channels, channels)
        self.transformer_block = BasicTransformerBlock(channels, heads, cross_dim)
        self.proj_out = nn.Linear(channels, channels)

    def forward(self, sample, encoder_hidden_states, image_embeds):
        batch, channels, height, width = sample.shape
        n = batch if self.bug == "embeds-repeated-per-batch" else 1
        ip_hidden_states = prepare_ip_adapter_image_embeds(image_embeds, n)                 # (n B, N, D)
        residual = sample
        hidden_states = self.norm(sample)
        hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch, height * width, channels)  # (B, Hp*Wp, C)
        hidden_states = self.proj_in(hidden_states)
        hidden_states = self.transformer_block(hidden_states, encoder_hidden_states, ip_hidden_states)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch, height, width, channels).permute(0, 3, 1, 2)  # (B, C, Hp, Wp)
        return hidden_states + residual


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5, S=7, N=4):
    torch.manual_seed(0)
    inputs = (torch.randn(B, D, Hp, Wp), torch.randn(B, S, D), torch.randn(B, N, D))
    return Transformer2DModel(D, H, D, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
