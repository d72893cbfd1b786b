"""The leak analysis (which input token reaches which output token in a broken model and not in the
reference) runs at a smaller width (:func:`shapetrace.attention.catalogue.leak_config`); it must find
exactly the pairs the brute-force analysis at the real size finds: one perturbed copy of the input
per token, through both full-size models. That brute force lives here only, as the oracle."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from shapetrace.app.session import trace_variant
from shapetrace.attention import variants
from shapetrace.attention.broken import build_broken
from shapetrace.attention.catalogue import ATTENTION_BREAKS as BREAKS
from shapetrace.attention.catalogue import apply_forces, leak_config
from shapetrace.attention.config import AttentionConfig as C

SIZES = [  # (batch, seq_len, d_model, heads)
    (2, 6, 512, 8),   # the default (no-key-transpose: T = d_k = 64, the 1.5x case)
    (2, 8, 512, 8),   # T = H
    (3, 4, 64, 4),    # T = H, three sequences
    (2, 4, 16, 4),    # T = H = d_k
    (2, 2, 4, 2),     # B = T = H = d_k
    (2, 5, 96, 4),    # odd sizes
    (1, 3, 24, 3),    # one sequence, T = H
]
OPTIONS = {
    "plain": {},
    "causal": {"causal": True},
    "padding": {"mask": "padding"},
    "causal-left-padding": {"causal": True, "mask": "padding", "pad_side": "left"},  # NaN rows
}


def oracle_dependencies(model, inputs) -> torch.Tensor:
    """deps[b, t, b2, t2]: output token (b2, t2) changes when +1 is added to every feature of input
    token (b, t); one forward pass per token, float32, at the model's own size."""
    x, memory, pad = inputs["x"], inputs["memory"], inputs["pad"]
    B, T, _ = x.shape
    deps = torch.zeros(B, T, B, T, dtype=torch.bool)
    with torch.no_grad():
        base = model(x, memory, pad)
        tolerance = 1e-4 * (1 + base.abs().nan_to_num(0.0).amax())
        for b in range(B):
            bumps = torch.zeros(T, B, T, 1)
            bumps[torch.arange(T), b, torch.arange(T)] = 1.0
            outs = torch.func.vmap(lambda xi: model(xi, memory, pad))(x + bumps)  # (T, B, T, D)
            changed = (outs - base).abs().nan_to_num(0.0).amax(-1) > tolerance
            deps[b] = changed | (torch.isnan(outs).any(-1) & ~torch.isnan(base).any(-1))
    return deps


@functools.cache
def reference_dependencies(config) -> torch.Tensor:
    """The reference's brute force for ``config`` with no break: :func:`variants.build_reference` never reads
    ``broken`` (seeded weights and inputs), so every break at one size and set of options shares it; computed
    once per worker, not once per break."""
    ref, inputs = variants.build_reference(config, "cpu")
    return oracle_dependencies(ref.eval(), inputs)


def oracle_leaks(config) -> list | None:
    ref, inputs = variants.build_reference(config, "cpu")
    model = build_broken(config, ref, "cpu").eval()
    try:
        extra = oracle_dependencies(model, inputs)
    except RuntimeError:  # the break raises (view-after-transpose): no leak analysis
        return None
    extra &= ~reference_dependencies(dataclasses.replace(config, broken=C().broken))
    return [((b, t), (b2, t2)) for b, t, b2, t2 in extra.nonzero().tolist()]


def cases():
    seen = set()
    for name in BREAKS:
        for size in SIZES:
            B, T, D, H = size
            for label, options in OPTIONS.items():
                pad = tuple(min(p, T - 1) for p in (0, 1, 2)[:B]) if options.get("mask") else ()
                config, _ = apply_forces(C(batch=B, seq_len=T, d_model=D, heads=H, broken=name, pad=pad,
                                           **options))
                if D == 512 and label not in ("plain", "causal"):
                    continue  # full width: the brute force is slow; the small sizes cover the masks
                if config not in seen:
                    seen.add(config)
                    yield pytest.param(config, id=f"{name}-B{B}-T{config.seq_len}-D{D}-H{H}-{label}")


@pytest.mark.parametrize("config", list(cases()))
def test_leaks_at_the_smaller_width_equal_the_full_size_brute_force(config):
    expected = oracle_leaks(config)
    comparison = trace_variant(config).comparison
    if expected is None:
        assert comparison["raised"] is not None
        return
    assert comparison["leaks"] == expected


def test_the_reference_and_its_inputs_do_not_depend_on_the_break():
    """What lets :func:`reference_dependencies` be shared by every break: the seeded reference model and
    inputs are the same whichever break the config names."""
    for name in BREAKS:
        config, _ = apply_forces(C(batch=2, seq_len=4, d_model=16, heads=4, broken=name))
        ref, inputs = variants.build_reference(config, "cpu")
        plain_ref, plain = variants.build_reference(dataclasses.replace(config, broken=C().broken), "cpu")
        assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), plain_ref.state_dict().values()))
        assert torch.equal(inputs["x"], plain["x"]) and inputs["pad"] == plain["pad"], name


def test_the_smaller_width_keeps_every_size_the_findings_name():
    for name, brk in BREAKS.items():
        config, _ = apply_forces(C(broken=name, causal=True))
        small = leak_config(config)
        assert (small.batch, small.seq_len, small.causal, small.mask, small.pad) == (
            config.batch, config.seq_len, config.causal, config.mask, config.pad)
        if brk.leak_free == "heads":  # q @ k with T = d_k: d_k stays, one head
            assert (small.d_k, small.heads) == (config.d_k, 1)
        else:
            assert (small.d_k, small.heads) == (2, config.heads)


def test_default_no_key_transpose_leaks_are_counted_exactly():
    """q @ k sums q's features against k's tokens, so query i sees every key token through the scores:
    with a causal mask each of the 63 queries after the first gets every later token (query 0 has one
    key left, whose softmax is exactly 1, so the scores do not matter): 2 · (63·64/2 − 63) pairs."""
    run = trace_variant(C(broken="no-key-transpose", causal=True))
    leaks = run.comparison["leaks"]
    assert len(leaks) == 2 * (63 * 64 // 2 - 63) == 3906
    assert all(s[0] == d[0] and s[1] > d[1] > 0 for s, d in leaks)
