"""The classes of silent attention bug as small functions, each beside its fix, and how to run them
under a trace: the one home of the bug models that tests/engine/test_bug_classes.py (is each class
caught), tests/engine/test_diagnose.py (what the diagnostics say) and tests/engine/test_diagnostic.py
draw from. Inputs are named only by ``dims`` unless a test names them (``names=``).
"""

from __future__ import annotations

import math

import pytest
import torch
from einops import rearrange
from torch import nn

import shapetrace

ERROR, WARNING = "error", "warning"


#: Projections built before the trace (so their initialisation is not traced), taken in order by lin().
_LINEARS: list[nn.Linear] = []


def lin(D_in, D_out):
    layer = _LINEARS.pop(0)
    assert (layer.in_features, layer.out_features) == (D_in, D_out)
    return layer


def qkv_heads(x, H):
    """Three projections of x [B, T, D], split into heads the right way: 3 x (B, H, T, d_k)."""
    B, T, D = x.shape
    projections = [lin(D, D) for _ in range(3)]
    return [p(x).view(B, T, H, D // H).transpose(1, 2) for p in projections]  # (B, H, T, d_k)


def finish(scores, v):
    """Softmax over the last axis, then weights @ v."""
    return torch.softmax(scores, dim=-1) @ v                                  # (B, H, T, d_k)


def merge(y):
    B, H, T, d = y.shape
    return y.transpose(1, 2).contiguous().view(B, T, H * d)                   # (B, T, D)


# -- the bugs ----------------------------------------------------------------------------------

def view_without_transpose(x, H):
    B, T, D = x.shape
    q, k, v = (lin(D, D)(x).view(B, H, T, D // H) for _ in range(3))          # (B, H?, T?, d_k): wrong
    return finish(q @ k.transpose(-2, -1) / math.sqrt(D // H), v)


def fuxictr_heads_as_tokens(x, H):
    B, T, D = x.shape
    q, k, v = (lin(D, D)(x).view(B * T, H, D // H) for _ in range(3))         # (B*T, H, d_k): heads as tokens
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(D // H)              # (B*T, H, H)
    return torch.bmm(torch.softmax(scores, dim=-1), v).view(B, T, D)          # (B, T, D)


def padding(B, T):
    keep = torch.ones(B, T, dtype=torch.bool)
    keep[-1, T // 2:] = False                                                 # the last sequence is padded
    return keep


def masked_fill_query_axis(value):
    def bug(x, H):
        q, k, v = qkv_heads(x, H)
        B, T = x.shape[:2]
        keep = padding(B, T)[:, None, :, None]                                # (B, 1, T, 1): the query axis
        scores = (q @ k.transpose(-2, -1)).masked_fill(~keep, value)          # (B, H, T, T)
        return finish(scores, v)
    return bug


def masked_fill_key_axis(value):
    def fixed(x, H):
        q, k, v = qkv_heads(x, H)
        B, T = x.shape[:2]
        keep = padding(B, T)[:, None, None, :]                                # (B, 1, 1, T): the key axis
        scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~keep, value)
        return merge(finish(scores, v))
    return fixed


def additive_mask(on_keys: bool, big: float):
    def fn(x, H):
        q, k, v = qkv_heads(x, H)
        B, T = x.shape[:2]
        additive = (~padding(B, T)).float() * big                             # (B, T): 0 or a large negative
        additive = additive[:, None, None, :] if on_keys else additive[:, None, :, None]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + additive  # (B, H, T, T)
        return merge(finish(scores, v))
    return fn


def tiled_mask(interleave: bool):
    def fn(x, H):
        B, T, D = x.shape
        q, k, v = (h.reshape(B * H, T, D // H) for h in qkv_heads(x, H))      # (B*H, T, d_k): b-major
        key_mask = padding(B, T)[:, None, :]                                  # (B, 1, T)
        if interleave:
            key_mask = key_mask.repeat_interleave(H, dim=0)                   # (B*H, 1, T): b-major, right
        else:
            key_mask = key_mask.repeat(H, 1, 1)                               # (H*B, 1, T): h-major, wrong
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(D // H)          # (B*H, T, T)
        scores = scores.masked_fill(~key_mask, float("-inf"))                 # (B*H, T, T)
        return torch.bmm(torch.softmax(scores, dim=-1), v).view(B, H, T, D // H)  # (B, H, T, d_k)
    return fn


def cross_heads(x, context, H):
    B, T, D = x.shape
    S = context.shape[1]
    q = lin(D, D)(x).view(B, T, H, D // H).transpose(1, 2)                    # (B, H, T, d_k)
    k = lin(D, D)(context).view(B, S, H, D // H).transpose(1, 2)              # (B, H, S, d_k)
    v = lin(D, D)(context).view(B, S, H, D // H).transpose(1, 2)              # (B, H, S, d_k)
    return q, k, v


def key_query_swapped(x, context, H):
    q, k, v = cross_heads(x, context, H)
    scores = k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])                 # (B, H, S, T): rows are keys
    weights = torch.softmax(scores, dim=-1)                                   # normalised over queries
    return weights.transpose(-2, -1) @ v                                      # (B, H, T, d_k)


def key_query_swapped_same_length(x, context, H):
    q, k, v = cross_heads(x, context, H)
    return finish(k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1]), v)        # runs only because S == T


def cross_attention_right(x, context, H):
    q, k, v = cross_heads(x, context, H)
    return merge(finish(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v))


def einops_tokens_into_heads(x, H):
    q, k, v = (rearrange(lin(x.shape[-1], x.shape[-1])(x), "b (h n) d -> b h n d", h=H) for _ in range(3))
    scores = torch.einsum("b h i d, b h j d -> b h i j", q, k)               # (B, H, T/H, T/H)
    return torch.einsum("b h i j, b h j d -> b h i d", scores.softmax(dim=-1), v)


def softmax_over_features(x, H):
    B, T, D = x.shape
    y = lin(D, D)(x).view(B, T, H, D // H).permute(0, 2, 3, 1)                # (B, H, d_k, T)
    scores = y @ y.transpose(-2, -1)                                          # (B, H, d_k, d_k)
    return torch.softmax(scores, dim=-1)                                      # over features


def scaled(by_model_width: bool):
    def fn(x, H):
        q, k, v = qkv_heads(x, H)
        D = x.shape[-1]
        scale = math.sqrt(D) if by_model_width else math.sqrt(D // H)
        return merge(finish(q @ k.transpose(-2, -1) / scale, v))
    return fn


def scaled_by_power(x, H):
    q, k, v = qkv_heads(x, H)
    return merge(finish((q @ k.transpose(-2, -1)) * x.shape[-1] ** -0.5, v))  # D ** -0.5, not d_k ** -0.5


def split(x, H):
    B, T, D = x.shape
    return x.view(B, T, H, D // H).transpose(1, 2)                            # (B, H, T, d_k)


def attend(q):
    return finish(q @ q.transpose(-2, -1), q)                                 # (B, H, T, d_k)


def correct(x, H):
    return merge(attend(split(x, H)))                                         # (B, T, D)


def skip_transpose(x, H):
    B, T, D = x.shape
    return attend(x.view(B, H, T, D // H))                                    # (B, H?, T?, d_k): wrong


def reshape_not_transpose(x, H):
    B, T, D = x.shape
    return attend(x.reshape(B, H, T, D // H))                                 # the same bug, with reshape


def wrong_transpose(x, H):
    B, T, D = x.shape
    return attend(x.view(B, T, H, D // H).transpose(0, 1))                    # (T, B, H, d_k)


def batch_as_seq(x, H):
    B, T, D = x.shape
    x = x.view(T, B, D).transpose(0, 1)                                       # (T?, B?, D): wrong
    q = x.reshape(x.shape[0], x.shape[1], H, D // H).transpose(1, 2)          # (T?, H, B?, d_k)
    return torch.softmax(q @ q.transpose(-2, -1), dim=-1)                     # attends over blocks of the batch


def no_key_transpose(x, H):
    q = split(x, H)
    return torch.softmax(q @ q, dim=-1)                                       # runs only when T == d_k


def interleaved_heads(x, H):
    B, T, D = x.shape
    q = x.view(B, T, D // H, H).permute(0, 3, 1, 2)                           # (B, H', T, d_k'): unusual split
    return attend(q).transpose(1, 2).reshape(B, T, D // H, H).contiguous().view(B, T, D)  # (B, T, D)


def softmax_dim_minus_2(x, H):
    q, k, v = qkv_heads(x, H)
    return torch.softmax(q @ k.transpose(-2, -1), dim=-2) @ v                 # normalises over queries


def merge_without_transpose(x, H):
    q, k, v = qkv_heads(x, H)
    B, T, D = x.shape
    y = finish(q @ k.transpose(-2, -1), v).reshape(B, T, D)                   # (B, T?, D?): heads and tokens mixed
    return lin(D, D)(y)                                                       # (B, T, D)


# -- running them ----------------------------------------------------------------------------------

def trace(fn, B=2, T=6, D=64, H=8, names: str | None = None, **extra):
    """``fn`` on x [B, T, D] under a trace with these dims; ``names`` also names x (as ``"B T D"``)."""
    torch.manual_seed(0)
    dims = {"B": B, "T": T, "D": D, "H": H, **extra}
    x = torch.randn(B, T, D)
    _LINEARS[:] = [nn.Linear(D, D, bias=False) for _ in range(4)]
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        if names is not None:
            shapetrace.name(x, names)
        fn(x, H)
    assert t.exception is None
    return t, dims


def found(t) -> set[tuple[str, str]]:
    return {(d.severity, d.kind) for d in t.diagnostics}


def caught(t, expected: tuple[str, str], order_unknown: bool) -> bool:
    """``expected`` (severity, kind) is among the findings; or, where the input's sizes fit two orders
    (``order_unknown``: B = T named by dims alone, so ``[B, T, D]`` is ``[T, B, D]`` too) and only one order
    makes it, it is left out, named in the ``order-of-equal-sizes`` note, and the verdict is ``?``
    (shapetrace/engine/readings.py: a finding resting on the order of equal sizes is never reported)."""
    if expected in found(t):
        return True
    notes = [d.message for d in t.diagnostics if d.kind == "order-of-equal-sizes"]
    return order_unknown and len(notes) == 1 and f" {expected[1]} at #" in notes[0].split(". ", 1)[0] \
        and t.report().verdict.line.startswith("? ")


def loud(t) -> list[tuple[str, str]]:
    return [(d.severity, d.kind) for d in t.diagnostics if d.severity in (ERROR, WARNING)]


def sizes(*cases):
    return [pytest.param(*c[:4], id="B{}-T{}-D{}-H{}".format(*c[:4]), marks=c[4] if len(c) > 4 else ())
            for c in cases]




def trace_cross(fn, B, T, S, D, H):
    torch.manual_seed(0)
    dims = {"B": B, "T": T, "S": S, "D": D, "H": H}
    x, context = torch.randn(B, T, D), torch.randn(B, S, D)
    _LINEARS[:] = [nn.Linear(D, D, bias=False) for _ in range(4)]
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        fn(x, context, H)
    assert t.exception is None
    return t, dims
