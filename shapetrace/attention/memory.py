"""How much memory a run would take with real tensors: the one home of every estimate.

``--device auto`` compares these with ``--max-memory`` to choose between real tensors and the meta
device. Plain arithmetic: nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from shapetrace.attention.catalogue import apply_forces

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.attention.config import AttentionConfig


def reference_bytes(config: AttentionConfig, element_size: int = 4) -> int:
    """Bytes of every tensor the reference forward creates (weights, input, 9 computed buffers).

    Weights 4·D² + 4·D; input, q, k, v, merged heads, its copy and the output 7·B·T·D;
    scores and softmax weights 2·B·H·T².
    """
    B, T, D, H = config.batch, config.seq_len, config.d_model, config.heads
    return element_size * (4 * D * D + 4 * D + 7 * B * T * D + 2 * B * H * T * T)


def dims_bytes(dims: Mapping[str, int], element_size: int = 4) -> int | None:
    """A rough size for a user's attention from ``--dims``: one [B, T, D] tensor and one score tensor."""
    B, T = dims.get("B", 1), dims.get("T") or dims.get("S") or dims.get("N") or dims.get("L")
    D, H = dims.get("D"), dims.get("H", 1)
    if T is None or D is None:
        return None
    return element_size * (8 * B * T * D + 2 * B * H * T * T + 4 * D * D)


def variant_bytes(config: AttentionConfig) -> int:
    """Float32 bytes a real run needs: weights twice (reference and copy), activations, and the
    scores, masked scores and weights [B, H, T_q, T_k]."""
    B, Tq, Tk, D, H = config.batch, config.seq_len, config.k_len, config.d_model, config.heads
    steps = config.decode or 0   # each step: one more token's activations, scores over the cache so far
    activations = 6 * B * (Tq + steps) * D + 4 * B * (Tk + steps) * D
    scores = 3 * B * H * (Tq * Tk + steps * (Tk + steps))
    cache = 2 * B * config.h_kv * config.d_k * (Tk + steps) * (steps + 1) if steps else 0   # one copy per step
    image = 0
    if config.image:   # the pixels, the conv weight and its [B, D, Hp, Wp] output
        image = B * config.in_channels * config.image ** 2 + config.in_channels * config.patch ** 2 * D + B * Tq * D
    return 4 * (2 * config.param_count + activations + scores + cache + image)


def forced_variant_bytes(config: AttentionConfig) -> int:
    """:func:`variant_bytes` of the config a variant runs with: a ``--break`` may force T = d_k, a decode,
    an image or a padding mask."""
    return variant_bytes(apply_forces(config)[0])
