"""First contact, round 2, the items left over (issue 23): the model source holds only attention
(the values a run shows are watched from the app), hints that follow the current verdict, one numbering."""

from __future__ import annotations

import pytest
import torch
from conftest import MODEL_DIR, run_cli

from shapetrace.app.attention_values import watching_attention
from shapetrace.app.session import trace_variant
from shapetrace.attention.config import AttentionConfig

# -- 1. no instrumentation in the model code -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in MODEL_DIR.glob("*.py")))
def test_the_model_source_holds_no_instrumentation(name):
    source = (MODEL_DIR / name).read_text(encoding="utf-8")
    assert "kept" not in source


def test_the_page_of_a_causal_run_cites_only_attention(tmp_path):
    out = tmp_path / "causal.html"
    proc = run_cli("run", "--causal", "--export", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text(encoding="utf-8")
    assert "kept" not in html and "weights = self.softmax(scores)" in html


def test_watching_sees_the_masked_scores_and_the_weights_and_leaves_the_model_as_it_was():
    from shapetrace.attention.reference import ConfigurableAttention

    torch.manual_seed(0)
    model = ConfigurableAttention(8, 2, causal=True)
    x = torch.randn(1, 3, 8)
    with watching_attention(model) as seen:
        model(x)
    scores = seen["scores"]                                            # (B, H, T, T)
    assert scores.shape == (1, 2, 3, 3) and torch.isneginf(scores[0, 0, 0, 1:]).all()
    assert torch.equal(seen["weights"], torch.softmax(scores, dim=-1))
    assert "softmax" not in vars(model) and not hasattr(model, "kept")


def test_watching_undoes_itself_when_the_forward_raises():
    from shapetrace.attention.broken import BROKEN_CLASSES

    model = BROKEN_CLASSES["view-after-transpose"](8, 2)
    with pytest.raises(RuntimeError), watching_attention(model):
        model(torch.randn(1, 3, 8))
    assert "softmax" not in vars(model)


def test_torch_impl_weights_come_from_a_hook_that_is_removed_after():
    from shapetrace.attention.variants import TorchAttention

    model = TorchAttention(8, 2)
    with watching_attention(model) as seen:
        model(torch.randn(2, 3, 8))
    assert tuple(seen["weights"].shape) == (2, 2, 3, 3)
    assert not model.mha._forward_hooks


def test_a_causal_run_still_draws_its_heat_map_from_the_watched_weights():
    run = trace_variant(AttentionConfig(causal=True))
    weights = run.heat["weights"]
    assert run.heat["shape"] == (6, 6) and weights[0][1:] == [0.0] * 5 and weights[5][5] > 0
    assert all(cell == float("-inf") for cell in run.heat["scores"][0][1:])
