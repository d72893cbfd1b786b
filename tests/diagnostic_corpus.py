"""A corpus of traces on which every diagnostic kind fires at least once (shared by the wording tests).

Sources: the broken catalogue at two sizes, the bug classes of ``tests/engine/test_bug_classes.py``, a NaN-row
variant, a meta run, and a few small programs for the kinds nothing else triggers.
"""

from __future__ import annotations

import torch

import shapetrace
from shapetrace.app.session import trace_variant
from shapetrace.attention.catalogue import BREAKS
from shapetrace.attention.config import AttentionConfig as C
from shapetrace.engine.kinds import Kind
from tests.corpus import bug_models as bugs
from tests.styles import load

#: every kind a rule of the engine can produce: the engine's own list (shapetrace/engine/kinds.py)
ALL_KINDS = {k.value for k in Kind}
#: the kinds this corpus fires (the others fire in the tests of their rule modules: test_contracts.py,
#: test_bug_classes.py, test_faults.py)
CORPUS_KINDS = {
    "mixed-axis", "tokens-merged-with-features", "tokens-regrouped-with-batch", "projection-over-tokens",
    "nonstandard-head-split", "contracts-different-axes", "batch-mismatch", "attends-over-wrong-axis",
    "softmax-wrong-axis", "ambiguous-sizes", "attends-over-heads", "attends-over-batch", "attends-over-features",
    "query-key-swapped", "mask-wrong-axis", "mask-wrong-batch-order", "nan-rows", "nan-rows-skipped",
    "view-incompatible", "scale-not-head-dim", "write-mismatch",
}


def _windows(x):
    B, T, D = x.shape
    return x.view(B * 2, T // 2, D)                             # (B·nW, T/2, D): windows of tokens


def _batch_mismatch(x):
    B, T, D = x.shape
    q = x.view(B, T, 4, D // 4).transpose(1, 2)                 # (B, H, T, d_k)
    return q @ q.transpose(-2, -1).transpose(0, 1)              # (B, H, T, d_k) @ (H, B, d_k, T): B = H = 4


def _cache_written_without_transpose(x):
    B, T, D = x.shape                                            # T == H == 4
    cache = x.new_zeros(B, 4, 10, D // 4)                        # (B, H, L, d_k)
    cache[:, :, 0:T] = x.view(B, T, 4, D // 4)                   # (B, T, H, d_k) written as (B, H, T, d_k)
    q = x.view(B, T, 4, D // 4).transpose(1, 2)                  # (B, H, T, d_k)
    return q @ cache[:, :, :T].transpose(-2, -1)                 # (B, H, T, L[0:T])


def _projection_over_tokens(x):
    """A linear over the tokens left beside the batch once each token's features were pooled away (gaasher/I-JEPA
    issue #15): the tokens came in as they are, so no earlier finding explains it (after a mixing view,
    projection-over-tokens folds into that view's mixed-axis). (A linear over the tokens of a channel-first map,
    ``Linear(T, D)(x.transpose(1, 2))``, was this case until rules/flattened_sequences.mixes_whole_tokens: a
    linear made T wide beside the features kept apart is MLP-Mixer's token mixing, by design.)"""
    torch.manual_seed(0)
    return torch.nn.Linear(x.shape[1], x.shape[2])(x.mean(dim=-1))     # (B, T) projected over T


def _ambiguous(x):
    return x.view(8, 8, 8, 8).transpose(1, 2)                   # (B, H, T, d_k), sizes all 8


def _named(fn, shape, dims, names="B T D"):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        if names:
            shapetrace.name(x, names)
        fn(x)
    return t


def _bug_traces():
    out = [bugs.trace(f, 2, 6, 64, 8)[0] for f in (
        bugs.view_without_transpose, bugs.fuxictr_heads_as_tokens, bugs.softmax_over_features,
        bugs.skip_transpose, bugs.softmax_dim_minus_2, bugs.merge_without_transpose,
        bugs.masked_fill_query_axis(float("-inf")), bugs.additive_mask(on_keys=False, big=-1e9),
        bugs.tiled_mask(interleave=False), bugs.scaled(by_model_width=True), bugs.scaled_by_power)]
    out.append(bugs.trace(bugs.einops_tokens_into_heads, 2, 8, 16, 4)[0])
    out.append(bugs.trace(bugs.merge_without_transpose, 2, 8, 64, 8)[0])        # T = H: merged, over tokens
    out.append(bugs.trace(bugs.view_without_transpose, 2, 8, 64, 8)[0])         # T = H: wrong axis
    out += [bugs.trace_cross(f, 2, 6, 10, 32, 4)[0] for f in (bugs.key_query_swapped,)]
    style = load("seq_first")
    model, _ = style.build({"B": 2, "T": 6, "D": 32, "H": 4})
    out.append(bugs.trace(lambda x, H: model(x), 2, 6, 32, 4)[0])
    return out


def corpus() -> list:
    """Every trace of the corpus (Report objects with diagnostics)."""
    traces = [trace_variant(C(batch=B, seq_len=T, d_model=D, heads=H, broken=name), compare=False).trace
              for name in BREAKS for B, T, D, H in [(2, 6, 512, 8), (2, 8, 64, 8)]]
    traces += _bug_traces()
    traces.append(trace_variant(C(causal=True, mask="padding", pad=(0, 2), pad_side="left")).trace)
    traces.append(trace_variant(C(d_model=256, heads=4, kv_heads=2, causal=True), max_bytes=1000).trace)
    traces.append(_named(_windows, (2, 6, 16), dict(B=2, T=6, D=16)))
    traces.append(_named(_batch_mismatch, (4, 6, 32), dict(B=4, T=6, D=32, H=4)))
    traces.append(_named(_ambiguous, (8, 8, 64), "B=8 T=8 D=64 H=8", names=""))   # ([B, T, D] or [T, B, D])
    traces.append(_named(_projection_over_tokens, (2, 8, 16), dict(B=2, T=8, D=16)))
    traces.append(_named(_cache_written_without_transpose, (2, 4, 32), dict(B=2, T=4, D=32, H=4)))
    return traces
