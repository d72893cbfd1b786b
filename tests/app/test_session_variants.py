"""``run --mask padding``, ``run --impl …`` and ``run --causal`` (shapetrace/app/session.py's variant path):
the dependency contracts measured as plain ``run`` measures them and printed in the same verdict line; each
sequence's padding (a list, one count per entry) given to the measuring rows as entry 0's."""

from __future__ import annotations

import pytest
import torch

from shapetrace.app.session import traced_variant
from shapetrace.attention import reference
from shapetrace.attention.config import AttentionConfig

HELD = "held on the values: batch entries stay apart, each token depends on itself"


@pytest.mark.parametrize("impl, ops", [("einops", 16), ("fused-qkv", 15), ("sdpa", 13)])
def test_run_impl_prints_the_plain_runs_contracts(cli, impl, ops):
    res = cli("run", "--impl", impl, "--width", "100")
    assert res.exit_code == 0, res.stdout
    assert (f"\n✓ checked all {ops} ops that could carry a layout bug: every axis keeps its meaning from input to\n"
            f"  output; {HELD}, heads\n  stay apart\n") in res.stdout


def test_run_impl_torch_says_why_its_heads_are_not_measured(cli):
    # nn.MultiheadAttention is one opaque call: no split into heads is recorded
    res = cli("run", "--impl", "torch", "--width", "100")
    assert res.exit_code == 0, res.stdout
    assert (f"\n  output; {HELD}; not measured:\n  heads (no head split found)\n") in res.stdout


@pytest.mark.parametrize("causal, pad", [((), "0,2"), (("--causal",), "2,0")])
def test_run_mask_padding_prints_the_contracts_it_measured(cli, causal, pad):
    # --pad 2,0: entry 0 padded. The measuring rows are all entry 0, so all take entry 0's padding (before,
    # the moved copy took entry 1's, saw keys entry 0 hides, and a correct causal mask read as leaking)
    res = cli("run", "--mask", "padding", "--pad", pad, *causal, "--width", "100")
    assert res.exit_code == 0, res.stdout
    mask = ", the causal\n  mask holds; " if causal else "; not measured:\n  "
    assert f"  output; {HELD}{mask}" in res.stdout
    assert "heads (the model cannot take a copy of its batch per head)\n" in res.stdout


def test_run_json_with_padding_lists_what_was_not_measured(cli):
    import json

    data = json.loads(cli("run", "--mask", "padding", "--pad", "2,0", "--causal", "--json").stdout)
    assert data["verdict"]["contracts"] == ["batch entries stay apart", "each token depends on itself",
                                       "the causal mask holds"]
    assert data["verdict"]["unmeasured"] == ["heads (the model cannot take a copy of its batch per head)"]


def _past_hidden(T_q, T_k, device=None):
    """The causal mask built with ``tril(-1)`` where ``triu(1)`` was meant (the slip of harvardnlp/annotated-
    transformer's ``subsequent_mask`` that tests/corpus/test_directions.py follows): each query sees itself
    and the future."""
    return reference.name_axes(torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(-1), "T T")   # (T, T)


def test_a_reversed_causal_mask_beside_padding_is_measured_as_leaking(monkeypatch):
    monkeypatch.setattr(reference, "causal_mask", _past_hidden)
    run = traced_variant(AttentionConfig(causal=True, mask="padding", pad=(0, 2)), "cpu")
    assert run.report().verdict.mark == "✗"
    broken, held, _ = run.trace._measured()
    assert [d.kind for d in broken] == ["causal-mask-leaks"] and held == ["batch entries stay apart",
                                                                           "each token depends on itself"]
    monkeypatch.undo()   # the correct twin stays silent
    run = traced_variant(AttentionConfig(causal=True, mask="padding", pad=(0, 2)), "cpu")
    assert run.report().verdict.mark == "✓" and "the causal mask holds" in run.report().verdict.contracts
