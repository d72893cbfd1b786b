"""The same attention written four more ways, all on the reference's weights.

``manual`` is :class:`~shapetrace.attention.reference.ConfigurableAttention` itself; the
classes here change only how heads are split and merged (einops), how q, k, v
are projected (one fused linear, the nanoGPT way), or who computes attention
(``nn.MultiheadAttention``, ``F.scaled_dot_product_attention``). Shapes are in
the comments: B batch, T_q / T_k query / key tokens (T in self-attention), D
features, H heads, H_kv key/value heads, d_k = D / H.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from shapetrace.attention.reference import ConfigurableAttention, causal_mask, padding_mask


class EinopsAttention(ConfigurableAttention):
    """Heads split and merged with einops patterns instead of view + transpose."""

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        return rearrange(x, "b t (h d) -> b h t d", h=self.heads)       # (B, H, T, d_k)

    def split_kv_heads(self, x: torch.Tensor) -> torch.Tensor:
        return rearrange(x, "b t (h d) -> b h t d", h=self.kv_heads)    # (B, H_kv, T_k, d_k)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        return rearrange(x, "b h t d -> b t (h d)")                     # (B, T, D)


class FusedQKVAttention(ConfigurableAttention):
    """One D x 3D linear for q, k and v, then ``split``: how nanoGPT does it."""

    def __init__(self, d_model: int, heads: int, **options):
        super().__init__(d_model, heads, **options)
        self.c_attn = nn.Linear(d_model, 3 * d_model)                   # D -> 3*D (q, k, v side by side)
        del self.w_q, self.w_k, self.w_v

    def load_reference(self, ref: ConfigurableAttention) -> None:
        with torch.no_grad():
            self.c_attn.weight.copy_(torch.cat([ref.w_q.weight, ref.w_k.weight, ref.w_v.weight]))  # (3*D, D)
            self.c_attn.bias.copy_(torch.cat([ref.w_q.bias, ref.w_k.bias, ref.w_v.bias]))          # (3*D,)
            self.w_o.load_state_dict(ref.w_o.state_dict())

    def project(self, x, memory):
        B, T, D = x.shape                                               # (B, T, D)
        q, k, v = self.c_attn(x).split(D, dim=2)                        # 3 x (B, T, D)
        q = q.view(B, T, self.heads, self.d_k).transpose(1, 2)          # (B, H, T, d_k)
        k = k.view(B, T, self.heads, self.d_k).transpose(1, 2)          # (B, H, T, d_k)
        v = v.view(B, T, self.heads, self.d_k).transpose(1, 2)          # (B, H, T, d_k)
        return q, k, v


class SdpaAttention(ConfigurableAttention):
    """Scores, mask, softmax, dropout and the weighted sum in one fused call."""

    def attend(self, q, k, v, masks) -> torch.Tensor:
        allowed = None
        if masks:
            hidden = masks[0]
            for mask in masks[1:]:
                hidden = hidden | mask                                  # broadcasts to (B, 1, T_q, T_k)
            allowed = ~hidden                                           # sdpa's convention: True = may attend
        p = self.p_drop if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)  # (B, H, T_q, d_k)


class TorchAttention(nn.Module):
    """``nn.MultiheadAttention(batch_first=True)`` with the reference's weights."""

    def __init__(self, d_model: int, heads: int, causal: bool = False, dropout: float = 0.0,
                 pad_side: str = "right", average_weights: bool = False, **_unused):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_model, heads, dropout=dropout, batch_first=True)
        self.causal, self.pad_side, self.average = causal, pad_side, average_weights

    def load_reference(self, ref: ConfigurableAttention) -> None:
        with torch.no_grad():
            self.mha.in_proj_weight.copy_(torch.cat([ref.w_q.weight, ref.w_k.weight, ref.w_v.weight]))
            self.mha.in_proj_bias.copy_(torch.cat([ref.w_q.bias, ref.w_k.bias, ref.w_v.bias]))
            self.mha.out_proj.load_state_dict(ref.w_o.state_dict())

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, pad=None) -> torch.Tensor:
        key_name = "T" if memory is None else "T_k"
        memory = x if memory is None else memory                        # (B, T_k, D)
        T_q, T_k = x.shape[1], memory.shape[1]
        attn_mask = causal_mask(T_q, T_k, x.device) if self.causal else None   # (T, T), True = hidden
        keys = None
        if pad is not None:
            keys = padding_mask(pad, T_k, self.pad_side, x.device, key_name)    # (B, T_k), True = padding
        y, weights = self.mha(x, memory, memory, key_padding_mask=keys, attn_mask=attn_mask,
                              need_weights=True, average_attn_weights=self.average)  # weights (B, H, T_q, T_k)
        return y                                                        # (B, T_q, D)


IMPL_CLASSES = {
    "manual": ConfigurableAttention, "einops": EinopsAttention, "fused-qkv": FusedQKVAttention,
    "torch": TorchAttention, "sdpa": SdpaAttention,
}


def model_options(config) -> dict:
    """Constructor options shared by every implementation."""
    return {"kv_heads": config.kv_heads, "causal": config.causal, "dropout": config.dropout,
            "safe_softmax": config.safe_softmax, "pad_side": config.pad_side}


def build_reference(config, device: str = "cpu") -> tuple[ConfigurableAttention, dict]:
    """The seeded reference model and its inputs: ``x`` (B, T_q, D), ``memory`` (B, T_k, D) or None.

    Built directly on ``device`` (``"meta"`` allocates nothing).
    """
    torch.manual_seed(config.seed)
    make = torch.empty if device == "meta" else torch.randn  # meta randn would load sympy (no values anyway)
    with torch.device(device):
        ref = ConfigurableAttention(config.d_model, config.heads, **model_options(config))
        x = make(config.batch, config.seq_len, config.d_model)                       # (B, T_q, D)
        memory = make(config.batch, config.k_len, config.d_model) if config.cross else None  # (B, T_k, D)
    return ref, {"x": x, "memory": memory, "pad": config.pad if config.mask == "padding" else None}


def share_weights(model: nn.Module, ref: ConfigurableAttention) -> nn.Module:
    """Copy the reference's q, k, v and output weights into ``model``."""
    if hasattr(model, "load_reference"):
        model.load_reference(ref)
    else:
        model.load_state_dict(ref.state_dict())
    return model


def build_impl(config, impl: str, ref: ConfigurableAttention, device: str = "cpu") -> nn.Module:
    """Implementation ``impl`` on the reference's weights, in eval or train mode as configured."""
    with torch.device(device):
        model = IMPL_CLASSES[impl](config.d_model, config.heads, **model_options(config))
    share_weights(model, ref)
    return model.train(config.train)
