"""Model code for the catalogue of classic attention bugs (see :mod:`shapetrace.attention.catalogue`).

Each class is the reference (:class:`~shapetrace.attention.reference.ConfigurableAttention`)
with one method written the wrong way. The shape comments say what the author
believed; the tracer's names say what really happens.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from shapetrace.attention.reference import ConfigurableAttention
from shapetrace.attention.variants import model_options


class SkipTranspose(ConfigurableAttention):
    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape                                   # (B, T, D)
        return x.view(B, self.heads, T, self.d_k)           # (B, H, T, d_k)? memory is still (B, T, D)


class ReshapeNotTranspose(ConfigurableAttention):
    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape                                   # (B, T, D)
        return x.reshape(B, self.heads, T, self.d_k)        # (B, H, T, d_k)? same as view here


class WrongTranspose(ConfigurableAttention):
    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape                                   # (B, T, D)
        x = x.view(B, T, self.heads, self.d_k)              # (B, T, H, d_k)
        return x.transpose(0, 1)                            # (T, B, H, d_k): should be transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        T, B, H, d_k = x.shape                              # (T, B, H, d_k)
        x = x.transpose(0, 1)                               # (B, T, H, d_k)
        return x.reshape(B, T, H * d_k)                     # (B, T, D)


class ViewAfterTranspose(ConfigurableAttention):
    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, H, T, d_k = x.shape                              # (B, H, T, d_k)
        x = x.transpose(1, 2)                               # (B, T, H, d_k), not contiguous
        return x.view(B, T, H * d_k)                        # RuntimeError: needs .contiguous() first


class MergeWithoutTranspose(ConfigurableAttention):
    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, H, T, d_k = x.shape                              # (B, H, T, d_k)
        return x.reshape(B, T, H * d_k)                     # (B, T, D)? heads still ahead of tokens


class InterleavedHeads(ConfigurableAttention):
    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape                                   # (B, T, D)
        x = x.view(B, T, self.d_k, self.heads)              # (B, T, d_k, H): head h = features h, h+H, ...
        return x.permute(0, 3, 1, 2)                        # (B, H, T, d_k)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, H, T, d_k = x.shape                              # (B, H, T, d_k)
        x = x.permute(0, 2, 3, 1)                           # (B, T, d_k, H)
        return x.reshape(B, T, d_k * H)                     # (B, T, D), interleaved back


class SoftmaxWrongDim(ConfigurableAttention):
    def softmax(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores, dim=-2)                # (B, H, T_q, T_k), columns sum to 1


class MaskWrongAxis(ConfigurableAttention):
    def key_mask_view(self, keys: torch.Tensor) -> torch.Tensor:
        return keys[:, None, :, None]                       # (B, 1, T, 1): masks query rows, not keys


class BatchAsSeq(ConfigurableAttention):
    def forward(self, x: torch.Tensor, memory=None, pad=None) -> torch.Tensor:
        B, T, D = x.shape                                   # (B, T, D)
        x_tbd = x.view(T, B, D)                             # (T, B, D)? should be x.transpose(0, 1)
        y_tbd = self.seq_first(x_tbd, pad)                  # (T, B, D)
        return y_tbd.transpose(0, 1)                        # (B, T, D)

    def seq_first(self, x: torch.Tensor, pad) -> torch.Tensor:
        """A module written for sequence-first input, like nn.MultiheadAttention's default."""
        x = x.transpose(0, 1)                               # (B, T, D)
        y = super().forward(x, pad=pad)                     # (B, T, D)
        return y.transpose(0, 1)                            # (T, B, D)


class NoKeyTranspose(ConfigurableAttention):
    def attend(self, q, k, v, masks) -> torch.Tensor:
        scores = q @ k / math.sqrt(self.d_k)                # (B, H, T, T)? sums d_k with T (T = d_k)
        for mask in masks:
            scores = scores.masked_fill(mask, float("-inf"))  # (B, H, T, T)
        weights = self.softmax(scores)                      # (B, H, T, T)
        return weights @ v                                  # (B, H, T, d_k)


BROKEN_CLASSES = {
    "skip-transpose": SkipTranspose, "reshape-not-transpose": ReshapeNotTranspose,
    "wrong-transpose": WrongTranspose, "view-after-transpose": ViewAfterTranspose,
    "merge-without-transpose": MergeWithoutTranspose, "interleaved-heads": InterleavedHeads,
    "softmax-wrong-dim": SoftmaxWrongDim, "mask-wrong-axis": MaskWrongAxis,
    "batch-as-seq": BatchAsSeq, "no-key-transpose": NoKeyTranspose,
}


def build_broken(config, ref: ConfigurableAttention, device: str = "cpu") -> nn.Module:
    """The broken variant ``config.broken`` on the reference's weights."""
    with torch.device(device):
        model = BROKEN_CLASSES[config.broken](config.d_model, config.heads, **model_options(config))
    model.load_state_dict(ref.state_dict())
    return model.train(config.train)
