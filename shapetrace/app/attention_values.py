"""The values a run shows beside its table (masked scores, attention weights), taken from outside the
model, so the model's source, which the table, step mode and the page cite, holds only attention.

While :func:`watching_attention` is active, every attention inside the model reports the last scores it
gave its softmax and the weights that came out (a :class:`~shapetrace.attention.reference.ConfigurableAttention`
through a wrapper around its ``softmax`` method); ``nn.MultiheadAttention`` reports the per-head weights it
returns (a forward hook). Implementations that never form the weights (a fused SDPA call) report nothing,
and the NaN check then reads the output instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any


@contextmanager
def watching_attention(model) -> Iterator[dict[str, Any]]:
    """Yield a dict that receives ``scores`` and ``weights`` of the last attention call in ``model``
    (a module); the model is left exactly as it was on exit, even when its forward raises.

    >>> import torch
    >>> from shapetrace.attention.reference import ConfigurableAttention
    >>> attention = ConfigurableAttention(8, 2)
    >>> with watching_attention(attention) as seen:
    ...     _ = attention(torch.randn(1, 3, 8))
    >>> sorted(seen), tuple(seen["weights"].shape)
    (['scores', 'weights'], (1, 2, 3, 3))
    >>> "softmax" in vars(attention)
    False
    """
    seen: dict[str, Any] = {}
    with ExitStack() as undo:
        for module in model.modules():
            watch = _watcher_for(module)
            if watch is not None:
                undo.callback(watch(module, seen))
        yield seen


def _watcher_for(module) -> Callable | None:
    from torch import nn

    from shapetrace.attention.reference import ConfigurableAttention

    if isinstance(module, ConfigurableAttention):
        return _wrap_softmax
    if isinstance(module, nn.MultiheadAttention):
        return _hook_weights
    return None


def _wrap_softmax(module, seen: dict) -> Callable[[], None]:
    """Put a recording ``softmax`` on the instance (the class's own is untouched); return the undo."""
    softmax = module.softmax

    def recorded(scores):
        weights = softmax(scores)
        seen.update(scores=scores, weights=weights)
        return weights

    module.softmax = recorded
    return lambda: module.__dict__.pop("softmax", None)


def _hook_weights(module, seen: dict) -> Callable[[], None]:
    """Keep the weights ``nn.MultiheadAttention`` returns (``need_weights``); return the undo."""

    def keep(_module, _args, output):
        if isinstance(output, tuple) and len(output) > 1 and output[1] is not None:
            seen["weights"] = output[1]

    return module.register_forward_hook(keep).remove
