"""neuro-galaxy/torch_brain pull request #74 ("Bugfix: Inverted mask in ``xformers`` rotary attention forward"):
in torch_brain/nn/rotary_attention.py, ``rotary_attn_xformers_func`` turned the context mask (``(b, n_kv)``, True
for the tokens that take part in attention) into an additive bias with ``attn_mask.float().masked_fill(attn_mask,
float("-inf"))``: the real tokens got ``-inf`` and the padding got ``0``, so every latent attended to the padding
only. "The bug only surfaces if you have ``xformers`` installed"; with the fix (``masked_fill(attn_mask.logical_not(),
...)``) the author found "it atleast trains", and "It wasn't learning at all when the mask was flipped".

The idiom (POYO's encoder cross-attention, ``RotaryCrossAttention.forward`` with the xformers kernel's reference
semantics written in torch): ``norm``/``norm_context``, ``to_q`` and ``to_kv(...).chunk(2, dim=-1)``,
``rearrange(t, "b n (h d) -> b n h d")`` (xformers' BMHK), the timestamps' rotary angles (``RotaryEmbedding``:
``einsum("..., f -> ... f")`` over ``omega``, half of the frequencies zero, repeated ``"(n r)"``, the pairs rotated
by ``rotate_half``) applied with ``head_dim=2``, ``repeat(attn_mask, "b m -> b h n m")`` turned into the bias,
``memory_efficient_attention``, ``rearrange(out, "b n h d -> b n (h d)")`` and ``to_out``; the latents' residual
and feed-forward. N latents attend to T tokens, the last one padding in one row and the last three in the other.

Bug (argument): ``bias-inverted``: the reported ``masked_fill(attn_mask, -inf)``.
Twin: ``sdpa-path``: the module's other kernel, ``rotary_attn_pytorch_func`` (``"b n (h d) -> b h n d"``, the
rotation with ``head_dim=1``, the boolean mask ``"b n -> b () () n"`` given to ``scaled_dot_product_attention``)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

BUGS = ("bias-inverted",)
TWINS = ("sdpa-path",)
DIMS = ("B=2 T=7 N=3 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 N=3 D=32 H=4"}


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, t_min=1e-4, t_max=4.0):
        super().__init__()
        omega = torch.zeros(dim // 2)
        omega[: dim // 4] = 2 * torch.pi / (t_min * ((t_max / t_min) ** (torch.arange(0, dim // 2, 2).float()
                                                                          / (dim // 2))))
        self.register_buffer("omega", omega)

    def forward(self, timestamps):
        angles = torch.einsum("..., f -> ... f", timestamps, self.omega)             # (B, N, d/2)
        return repeat(angles, "... n -> ... (n r)", r=2)                             # (B, N, d)


def rotate_half(x):
    x = rearrange(x, "... (d r) -> ... d r", r=2)
    x1, x2 = x.unbind(dim=-1)
    x = torch.stack((-x2, x1), dim=-1)
    return rearrange(x, "... d r -> ... (d r)")


def apply_rotary_pos_emb(pos_emb, x, head_dim=2):
    if head_dim == 1:
        pos_emb = rearrange(pos_emb, "n ... -> n () ...")                             # (B, 1, N, d)
    elif head_dim == 2:
        pos_emb = rearrange(pos_emb, "n m ... -> n m () ...")                         # (B, N, 1, d)
    return (x * pos_emb.cos()) + (rotate_half(x) * pos_emb.sin())


def memory_efficient_attention(query, key, value, attn_bias=None):
    """xformers' reference semantics: BMHK inputs, a bias ``(B, H, M_q, M_k)`` added to the scores."""
    query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)   # (B, H, N, d)
    attn = (query * query.shape[-1] ** -0.5) @ key.transpose(-2, -1)                 # (B, H, N, T)
    if attn_bias is not None:
        attn = attn + attn_bias
    out = attn.softmax(-1) @ value                                                   # (B, H, N, d)
    return out.transpose(1, 2)                                                       # (B, N, H, d)


def rotary_attn_xformers_func(*, query, key, value, q_pos_emb, kv_pos_emb, attn_mask, num_heads, bug=""):
    query = rearrange(query, "b n (h d) -> b n h d", h=num_heads)                     # (B, N, H, d)
    key = rearrange(key, "b n (h d) -> b n h d", h=num_heads)                         # (B, T, H, d)
    value = rearrange(value, "b n (h d) -> b n h d", h=num_heads)                     # (B, T, H, d)
    query = apply_rotary_pos_emb(q_pos_emb, query, head_dim=2)
    key = apply_rotary_pos_emb(kv_pos_emb, key, head_dim=2)
    attn_mask = repeat(attn_mask, "b m -> b h n m", h=num_heads, n=query.size(1))     # (B, H, N, T)
    if bug == "bias-inverted":
        attn_bias = attn_mask.float().masked_fill(attn_mask, float("-inf"))
    else:
        attn_bias = attn_mask.float().masked_fill(attn_mask.logical_not(), float("-inf"))
    out = memory_efficient_attention(query, key, value, attn_bias=attn_bias)          # (B, N, H, d)
    return rearrange(out, "b n h d -> b n (h d)")                                     # (B, N, D)


def rotary_attn_pytorch_func(*, query, key, value, q_pos_emb, kv_pos_emb, attn_mask, num_heads):
    query = rearrange(query, "b n (h d) -> b h n d", h=num_heads)                     # (B, H, N, d)
    key = rearrange(key, "b n (h d) -> b h n d", h=num_heads)                         # (B, H, T, d)
    value = rearrange(value, "b n (h d) -> b h n d", h=num_heads)                     # (B, H, T, d)
    query = apply_rotary_pos_emb(q_pos_emb, query, head_dim=1)
    key = apply_rotary_pos_emb(kv_pos_emb, key, head_dim=1)
    attn_mask = rearrange(attn_mask, "b n -> b () () n")                              # (B, 1, 1, T)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)      # (B, H, N, d)
    return rearrange(out, "b h n d -> b n (h d)")                                     # (B, N, D)


class RotaryCrossAttention(nn.Module):
    def __init__(self, *, dim, heads, dim_head, bug=""):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads, self.bug = heads, bug
        self.norm, self.norm_context = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)

    def forward(self, x_query, x_context, query_pos_emb, context_pos_emb, context_mask):
        x_query, x_context = self.norm(x_query), self.norm_context(x_context)
        q = self.to_q(x_query)
        k, v = self.to_kv(x_context).chunk(2, dim=-1)
        kwargs = dict(query=q, key=k, value=v, q_pos_emb=query_pos_emb, kv_pos_emb=context_pos_emb,
                      attn_mask=context_mask, num_heads=self.heads)
        if self.bug == "sdpa-path":
            out = rotary_attn_pytorch_func(**kwargs)
        else:
            out = rotary_attn_xformers_func(**kwargs, bug=self.bug)
        return self.to_out(out)


class PerceiverEncoder(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.rotary_emb = RotaryEmbedding(dim // heads)
        self.enc_atn = RotaryCrossAttention(dim=dim, heads=heads, dim_head=dim // heads, bug=bug)
        self.enc_ffn = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, latents, latent_timestamps, inputs, input_timestamps, input_mask):
        latent_timestamp_emb = self.rotary_emb(latent_timestamps)                     # (B, N, d)
        input_timestamp_emb = self.rotary_emb(input_timestamps)                       # (B, T, d)
        latents = latents + self.enc_atn(latents, inputs, latent_timestamp_emb, input_timestamp_emb, input_mask)
        return latents + self.enc_ffn(latents)


def build(bug="", B=2, T=7, N=3, D=32, H=4):
    torch.manual_seed(0)
    input_timestamps = torch.sort(torch.rand(B, T), dim=-1).values                   # (B, T)
    latent_timestamps = torch.linspace(0, 1, N).expand(B, N)                          # (B, N)
    lengths = torch.tensor([T - 1, T - 3] * B)[:B]
    input_mask = torch.arange(T)[None, :] < lengths[:, None]                          # (B, T): True = real
    inputs = (torch.randn(B, N, D), latent_timestamps, torch.randn(B, T, D), input_timestamps, input_mask)
    return PerceiverEncoder(D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
