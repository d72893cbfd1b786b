"""Function-level entries of the bug catalogue: one broken version of one function each.

The catalogue (:mod:`shapetrace.attention.catalogue`) lists every classic bug once. Some are whole-model
breaks (``run --break``, model code in :mod:`shapetrace.attention.broken`); the broken *functions* here
are what the test-writing exercises grade a learner's test against (each a mutant that the test must
fail). A function carries the name of the function it replaces, so the code a learner's test receives
says nothing about which bug it is; ``@broken`` files it under its catalogue id with what it does.

Each function is self-contained (its imports inside): the checker's child runs its source on its own.
No torch at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Filed:
    """A broken function as filed: its catalogue id, the function it replaces, and what it does."""

    break_id: str
    does: str
    fn: Callable


FILED: list[Filed] = []


def broken(break_id: str, does: str) -> Callable[[Callable], Callable]:
    """File the decorated function under the catalogue id ``break_id``."""
    def file(fn: Callable) -> Callable:
        FILED.append(Filed(break_id, " ".join(does.split()), fn))
        return fn
    return file


# -- split_heads(x, heads): [B, T, D] -> [B, H, T, d_k] ------------------------------------------------

@broken("skip-transpose", "the split that views [B, T, D] straight as [B, H, T, d_k] and forgets the transpose")
def split_heads(x, heads):
    B, T, D = x.shape                                       # (B, T, D)
    return x.view(B, heads, T, D // heads)                  # (B, H, T, d_k)? memory is still (B, T, D)


@broken("reshape-not-transpose",
        "the split that reshapes [B, T, H, d_k] to [B, H, T, d_k] instead of transposing it")
def split_heads(x, heads):
    B, T, D = x.shape                                       # (B, T, D)
    x = x.view(B, T, heads, D // heads)                     # (B, T, H, d_k)
    return x.reshape(B, heads, T, D // heads)               # (B, H, T, d_k)? same order as (B, T, H, d_k)


@broken("transpose-h-dk", "the split that swaps H and d_k (axes 2 and 3) instead of T and H")
def split_heads(x, heads):
    B, T, D = x.shape                                       # (B, T, D)
    x = x.view(B, T, heads, D // heads)                     # (B, T, H, d_k)
    return x.transpose(2, 3)                                # (B, T, d_k, H): should be transpose(1, 2)


@broken("interleaved-heads", "the split that cuts D as (d_k, H), so head 0 gets every H-th feature")
def split_heads(x, heads):
    B, T, D = x.shape                                       # (B, T, D)
    x = x.view(B, T, D // heads, heads)                     # (B, T, d_k, H): head h = features h, h+H, ...
    return x.permute(0, 3, 1, 2)                            # (B, H, T, d_k)


# -- combine_heads(y): [B, H, T, d_k] -> [B, T, D] -----------------------------------------------------

@broken("skip-transpose", "the merge that views [B, H, T, d_k] straight back as [B, T, D]")
def combine_heads(y):
    B, H, T, d_k = y.shape                                  # (B, H, T, d_k)
    return y.view(B, T, H * d_k)                            # (B, T, D)? heads still ahead of tokens


@broken("merge-without-transpose", "the merge that reshapes [B, H, T, d_k] straight to [B, T, D]")
def combine_heads(y):
    B, H, T, d_k = y.shape                                  # (B, H, T, d_k)
    return y.reshape(B, T, H * d_k)                         # (B, T, D)? heads still ahead of tokens


@broken("transpose-h-dk", "the merge that swaps d_k and H back")
def combine_heads(y):
    B, T, d_k, H = y.shape                                  # (B, T, d_k, H)
    return y.transpose(2, 3).reshape(B, T, H * d_k)         # (B, T, D)


@broken("interleaved-heads", "the merge that interleaves them back")
def combine_heads(y):
    B, H, T, d_k = y.shape                                  # (B, H, T, d_k)
    return y.permute(0, 2, 3, 1).reshape(B, T, H * d_k)     # (B, T, D), interleaved back


# -- causal_weights(scores): softmax over keys 0..t for query t -------------------------------------------

@broken("tril-for-triu",
        "the mask built with tril instead of triu, which hides the past and lets every query see the future")
def causal_weights(scores):
    import torch

    T = scores.shape[-1]
    past = torch.ones(T, T, dtype=torch.bool).tril(-1)     # (T, T_k): True below the diagonal
    return torch.softmax(scores.masked_fill(past, float("-inf")), dim=-1)  # (B, H, T, T_k)


@broken("diagonal-masked", "the mask that also hides the diagonal, so no token attends to itself and "
                           "query 0 gets a row of NaN")
def causal_weights(scores):
    import torch

    T = scores.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu()     # (T, T_k): the diagonal too
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # (B, H, T, T_k)


@broken("off-by-one", "the mask that starts one diagonal too late (triu(2)), so query t also sees key t + 1")
def causal_weights(scores):
    import torch

    T = scores.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(2)    # (T, T_k): misses key t + 1
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # (B, H, T, T_k)


@broken("no-mask", "the softmax with no mask at all")
def causal_weights(scores):
    import torch

    return torch.softmax(scores, dim=-1)                    # (B, H, T, T_k)


# -- repeat_kv(kv, n_rep): [B, H_kv, T, d_k] -> [B, H_kv * n_rep, T, d_k], head h = kv head h // n_rep ------

@broken("repeat-tiles", "repeat(1, n_rep, 1, 1), which tiles the kv heads (0, 1, 0, 1, ...) instead of repeating "
                        "each in place (0, 0, 1, 1, ...)")
def repeat_kv(kv, n_rep):
    return kv.repeat(1, n_rep, 1, 1)                        # (B, n_rep * H_kv, T, d_k): kv heads tiled


@broken("expand-wrong-axis", "the expand that puts the new axis before the kv heads, which tiles them too")
def repeat_kv(kv, n_rep):
    B, H_kv, T, d_k = kv.shape                              # (B, H_kv, T, d_k)
    kv = kv[:, None].expand(B, n_rep, H_kv, T, d_k)         # (B, n_rep, H_kv, T, d_k)
    return kv.reshape(B, H_kv * n_rep, T, d_k)              # (B, H, T, d_k), kv heads tiled


@broken("first-head-only", "the version that repeats kv head 0 for every query head")
def repeat_kv(kv, n_rep):
    B, H_kv, T, d_k = kv.shape                              # (B, H_kv, T, d_k)
    return kv[:, :1].expand(B, H_kv * n_rep, T, d_k)        # (B, H, T, d_k), all kv head 0


@broken("interleave-tokens", "repeat_interleave along the token axis, which returns [B, H_kv, T * n_rep, d_k]")
def repeat_kv(kv, n_rep):
    return kv.repeat_interleave(n_rep, dim=2)               # (B, H_kv, T * n_rep, d_k)


# -- append_kv(cache, step): [B, H_kv, T, d_k] + [B, H_kv, 1, d_k] -> [B, H_kv, T + 1, d_k] -------------------

@broken("cache-wrong-axis", "the append that joins the new step along the head axis (cat dim=1), which only "
                            "runs when the cache holds one step, and then doubles the heads")
def append_kv(cache, step):
    import torch

    return torch.cat([cache, step], dim=1)                  # (B, 2 * H_kv, 1, d_k) when T = 1; else raises


@broken("cache-new-first", "the append that puts the new step in front of the old ones")
def append_kv(cache, step):
    import torch

    return torch.cat([step, cache], dim=2)                  # (B, H_kv, T + 1, d_k): newest first


@broken("cache-drops-oldest", "the append that drops the oldest step to make room, so the cache never grows")
def append_kv(cache, step):
    import torch

    return torch.cat([cache[:, :, 1:], step], dim=2)        # (B, H_kv, T, d_k): a sliding window


@broken("cache-stale-step", "the append that repeats the cache's last step instead of the new one")
def append_kv(cache, step):
    import torch

    return torch.cat([cache, cache[:, :, -1:]], dim=2)      # (B, H_kv, T + 1, d_k): the new step is lost


@broken("cache-first-head-step", "the append that gives every kv head kv head 0's new step")
def append_kv(cache, step):
    import torch

    step = step[:, :1].expand_as(step)                      # (B, H_kv, 1, d_k): head 0 everywhere
    return torch.cat([cache, step], dim=2)                  # (B, H_kv, T + 1, d_k)


# -- patchify(x, p): [B, C, h * p, w * p] -> [B, h * w, C * p * p], patches row by row, each as (C, p, p) ----------

@broken("patches-without-permute", "the patchify that reshapes the image straight to [B, N, C * p * p], "
                                   "reading memory in order")
def patchify(x, p):
    B, C, H, W = x.shape                                    # (B, C, H_img, W_img)
    return x.reshape(B, (H // p) * (W // p), C * p * p)     # (B, N, C*p*p)? runs of pixel rows


@broken("unfold-without-transpose", "F.unfold alone, which returns [B, C * p * p, N] with the patches on the "
                                    "last axis")
def patchify(x, p):
    import torch.nn.functional as F

    return F.unfold(x, p, stride=p)                         # (B, C*p*p, N)


@broken("patches-column-major", "the patchify that numbers the patches down the columns instead of along the rows")
def patchify(x, p):
    B, C, H, W = x.shape                                    # (B, C, H_img, W_img)
    x = x.reshape(B, C, H // p, p, W // p, p)               # (B, C, h, p, w, p)
    x = x.permute(0, 4, 2, 1, 3, 5)                         # (B, w, h, C, p, p): w before h
    return x.reshape(B, (H // p) * (W // p), C * p * p)     # (B, N, C*p*p)


@broken("patch-pixels-transposed", "the patchify that flattens each patch column by column (C, p_w, p_h)")
def patchify(x, p):
    B, C, H, W = x.shape                                    # (B, C, H_img, W_img)
    x = x.reshape(B, C, H // p, p, W // p, p)               # (B, C, h, p, w, p)
    x = x.permute(0, 2, 4, 1, 5, 3)                         # (B, h, w, C, p_w, p_h)
    return x.reshape(B, (H // p) * (W // p), C * p * p)     # (B, N, C*p*p)


@broken("patches-channel-last", "the patchify that flattens each patch as (p, p, C), channel last, not the "
                                "(C, p, p) of F.unfold and of a Conv2d weight")
def patchify(x, p):
    B, C, H, W = x.shape                                    # (B, C, H_img, W_img)
    x = x.reshape(B, C, H // p, p, W // p, p)               # (B, C, h, p, w, p)
    x = x.permute(0, 2, 4, 3, 5, 1)                         # (B, h, w, p, p, C)
    return x.reshape(B, (H // p) * (W // p), C * p * p)     # (B, N, C*p*p)


# -- fused_attention(q, k, v): [B, T, H, d_k] each -> [B, T, H, d_k], through F.scaled_dot_product_attention -----

@broken("sdpa-wrong-layout", "the call that hands SDPA the [B, T, H, d_k] tensors as they are, so each token "
                             "attends over its own heads")
def fused_attention(q, k, v):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v)          # (B, T, H, d_k): attends over H


@broken("sdpa-no-transpose-back", "the call that transposes into SDPA's layout but returns its [B, H, T, d_k] "
                                  "output as it is")
def fused_attention(q, k, v):
    import torch.nn.functional as F

    q, k, v = (t.transpose(1, 2) for t in (q, k, v))        # (B, H, T, d_k)
    return F.scaled_dot_product_attention(q, k, v)          # (B, H, T, d_k): never moved back


@broken("sdpa-view-not-transpose", "the call that reshapes [B, T, H, d_k] to [B, H, T, d_k] instead of "
                                   "transposing it, and reshapes the output back")
def fused_attention(q, k, v):
    import torch.nn.functional as F

    B, T, H, d_k = q.shape                                  # (B, T, H, d_k)
    q, k, v = (t.reshape(B, H, T, d_k) for t in (q, k, v))  # (B, H, T, d_k)? memory still (B, T, H, d_k)
    return F.scaled_dot_product_attention(q, k, v).reshape(B, T, H, d_k)  # (B, T, H, d_k)


@broken("sdpa-is-causal", "the call with is_causal=True, which hides every later key from each query")
def fused_attention(q, k, v):
    import torch.nn.functional as F

    q, k, v = (t.transpose(1, 2) for t in (q, k, v))        # (B, H, T, d_k)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_k)
    return out.transpose(1, 2)                              # (B, T, H, d_k)


@broken("sdpa-wrong-scale", "the call with scale=1 / d_k instead of SDPA's default 1 / sqrt(d_k)")
def fused_attention(q, k, v):
    import torch.nn.functional as F

    q, k, v = (t.transpose(1, 2) for t in (q, k, v))        # (B, H, T, d_k)
    out = F.scaled_dot_product_attention(q, k, v, scale=1 / q.shape[-1])  # (B, H, T, d_k)
    return out.transpose(1, 2)                              # (B, T, H, d_k)


# -- apply_rope(x, cos, sin): x [B, H, T, d_k], tables [T, d_k] in rotate_half's layout -> [B, H, T, d_k] ----------

@broken("rope-table-on-heads", "the rotation whose [T, 1, d_k] table lines up with the heads: it raises when T and "
                               "H differ and neither is 1, and with T = H turns head h by position h's angle")
def apply_rope(x, cos, sin):
    import torch

    cos, sin = cos[:, None, :], sin[:, None, :]             # (T, 1, d_k): T on the head axis of x
    x1, x2 = x.chunk(2, dim=-1)                             # (B, H, T, d_k/2) each
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin     # (B, H, T, d_k) when T = H or T = 1


@broken("rope-sign-flipped", "the rotation whose rotate_half returns (x2, -x1), which turns every pair backwards")
def apply_rope(x, cos, sin):
    import torch

    x1, x2 = x.chunk(2, dim=-1)                             # (B, H, T, d_k/2) each
    return x * cos + torch.cat([x2, -x1], dim=-1) * sin     # (B, H, T, d_k): by -angle


@broken("rope-neighbour-pairs", "the rotation that turns neighbouring features (0, 1), (2, 3), ... with a table "
                                "in rotate_half's layout")
def apply_rope(x, cos, sin):
    import torch

    even, odd = x[..., 0::2], x[..., 1::2]                  # (B, H, T, d_k/2) each
    rotated = torch.stack([-odd, even], dim=-1).flatten(-2)  # (B, H, T, d_k): pairs (2i, 2i+1)
    return x * cos + rotated * sin                          # (B, H, T, d_k)


@broken("rope-cos-only", "the rotation that forgets the sin term and only scales x by cos")
def apply_rope(x, cos, sin):
    return x * cos                                          # (B, H, T, d_k): no rotation at all


# -- head_backward(q, k, v, dy): one head's (dq, dk, dv) for y = softmax(q kᵀ / √d_k) v, q [T, d_k], k, v [T_k, d_k] --

@broken("softmax-grad-no-row-term", "the backward whose softmax step is P ⊙ dP, without the row term "
                                    "− P ⊙ Σ (dP ⊙ P), so dq and dk are wrong and dv is right")
def head_backward(q, k, v, dy):
    import math

    import torch

    p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # (T, T_k)
    ds = p * (dy @ v.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (T, T_k): no row term
    return ds @ k, ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ dy  # (T, d_k), (T_k, d_k), (T_k, d_k)


@broken("softmax-grad-no-scale", "the backward that forgets the 1/√d_k of the scores in dq and dk")
def head_backward(q, k, v, dy):
    import math

    import torch

    p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # (T, T_k)
    dp = dy @ v.transpose(-2, -1)                           # (T, T_k)
    ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True))      # (T, T_k): never divided by √d_k
    return ds @ k, ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ dy  # (T, d_k), (T_k, d_k), (T_k, d_k)


@broken("grad-dv-from-scores", "the backward whose dv is taken through the scores before the softmax, "
                                "Sᵀ · dY instead of Pᵀ · dY")
def head_backward(q, k, v, dy):
    import math

    import torch

    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])    # (T, T_k)
    p = torch.softmax(s, dim=-1)                            # (T, T_k)
    dp = dy @ v.transpose(-2, -1)                           # (T, T_k)
    ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True)) / math.sqrt(q.shape[-1])  # (T, T_k)
    return ds @ k, ds.transpose(-2, -1) @ q, s.transpose(-2, -1) @ dy  # dv from the scores


@broken("grad-dk-not-transposed", "the backward whose dk is dS · q, which runs only when T = T_k, instead of "
                                  "dSᵀ · q")
def head_backward(q, k, v, dy):
    import math

    import torch

    p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # (T, T_k)
    dp = dy @ v.transpose(-2, -1)                           # (T, T_k)
    ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True)) / math.sqrt(q.shape[-1])  # (T, T_k)
    return ds @ k, ds @ q, p.transpose(-2, -1) @ dy         # (T, d_k), (T, d_k) when T = T_k, (T_k, d_k)


del split_heads, combine_heads, causal_weights, repeat_kv, append_kv, patchify, fused_attention, apply_rope
del head_backward
