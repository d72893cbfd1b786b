"""One batch entry picked, or the batch averaged into one, where each entry needs its own output
(shapetrace/engine/rules/batch_picks.py).

The classifier head of a ViT-style encoder in the style of timm's ``VisionTransformer.forward_head``
(pytorch-image-models, timm/models/vision_transformer.py: ``x = x[:, 0]`` for the class token) and the
slip that writes ``x[0]``: the first batch entry's tokens go to the head, every op after it is right on
what it gets and is named (``[T, D]``), and the batch contract cannot be measured (the output has no batch
axis). On 9890a4f the slip was ``✓ checked all 15 ops``; now a batch-picked note leaves ``?``. A loop that
picks each entry and stacks them back, and a script that prints ``out[0]`` after the forward, are silent."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import shapetrace


class Encoder(nn.Module):
    def __init__(self, pool="cls", D=32, H=4, classes=10):
        super().__init__()
        self.qkv, self.proj, self.head = nn.Linear(D, 3 * D), nn.Linear(D, D), nn.Linear(D, classes)
        self.cls_token = nn.Parameter(torch.randn(1, 1, D))
        self.H, self.pool = H, pool

    def forward(self, x):
        B, N, D = x.shape                                                          # (B, N, D)
        x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1)                # (B, 1+N, D)
        qkv = self.qkv(x).reshape(B, N + 1, 3, self.H, D // self.H).permute(2, 0, 3, 1, 4)  # (3, B, H, 1+N, hd)
        q, k, v = qkv.unbind(0)                                                    # (B, H, 1+N, hd) each
        att = (q @ k.transpose(-2, -1) / math.sqrt(D // self.H)).softmax(-1)       # (B, H, 1+N, 1+N)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, N + 1, D))          # (B, 1+N, D)
        if self.pool == "first-entry":   # the slip: the first batch entry's tokens
            return self.head(x[0])                                                 # (1+N, classes)
        if self.pool == "each-entry":    # a loop over the entries, stacked back: every entry kept
            return torch.stack([self.head(x[b, 0]) for b in range(B)])             # (B, classes)
        if self.pool == "mean-tokens":   # mean pooling over the tokens (timm's global_pool='avg')
            return self.head(x.mean(1))                                            # (B, classes)
        if self.pool == "mean-batch":    # the slip: the mean over the batch
            return self.head(x.mean(0))                                            # (1+N, classes)
        if self.pool == "centred":       # a batch statistic broadcast back onto the batch, then pooled
            return self.head((x - x.mean(0, keepdim=True)).mean(1))                # (B, classes)
        return self.head(x[:, 0])                                                  # (B, classes)


def _report(pool, B=2, N=6, shown=False):
    torch.manual_seed(0)
    model, x = Encoder(pool), torch.randn(B, N, 32)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={N} D=32 H=4", dependencies=True) as t:
        shapetrace.name(x, "B T D")
        out = model(x)
        if shown:
            out[0].argmax()   # a script looking at the first entry's prediction, outside the model
    return t.report()


@pytest.mark.parametrize("B", [2, 3])
def test_the_first_entry_picked_for_the_class_token_is_not_a_check_mark(B):
    report = _report("first-entry", B)
    notes = [d for d in report.diagnostics if d.kind == "batch-picked"]
    assert [d.severity for d in notes] == ["note"] and report.verdict.mark == "?"
    assert notes[0].message == (
        f"__getitem__ #13 picks one entry of [B={B}, 1+T=7, D=32]'s batch B ({B} entries) and drops the others: "
        "[1+T=7, D=32] goes on without a batch axis, and nothing made from it has one again, so one entry's "
        "result stands for all of them.")
    assert "one entry of the batch was picked and the others dropped for good" in report.verdict.unproven


@pytest.mark.parametrize("shown", [False, True])
def test_every_entry_kept_or_a_script_looking_at_one_is_silent(shown):
    report = _report("cls", shown=shown)
    assert "batch-picked" not in [d.kind for d in report.diagnostics]
    assert report.verdict.mark == "✓"


def test_a_loop_that_stacks_every_entry_back_picks_none():
    """Each entry picked in turn and stacked back: no note (the stack's new axis has no name, so the
    verdict stays ``?`` for that, not for a pick)."""
    report = _report("each-entry")
    assert [d.kind for d in report.diagnostics] == [] and report.verdict.mark == "?"


def test_one_entry_of_a_batch_of_one_is_no_pick():
    assert "batch-picked" not in [d.kind for d in _report("first-entry", B=1).diagnostics]


@pytest.mark.parametrize("B", [2, 3])
def test_a_mean_over_the_batch_for_the_tokens_is_not_a_check_mark(B):
    """``x.mean(0)`` written for ``x.mean(1)`` (timm's average pooling is over the tokens): on 9890a4f
    ``✓ checked all 15 ops``, the batch contract unmeasured for want of a batch axis in the output."""
    report = _report("mean-batch", B)
    notes = [d for d in report.diagnostics if d.kind == "batch-reduced"]
    assert [d.severity for d in notes] == ["note"] and report.verdict.mark == "?"
    assert notes[0].message == (
        f"mean #13 reduces [B={B}, 1+T=7, D=32] over its batch B ({B} entries) and keeps 1+T, D: [1+T=7, D=32] "
        "mixes every entry into one, and nothing made from it has a batch axis again.")


@pytest.mark.parametrize("pool", ["mean-tokens", "centred"])
def test_a_mean_over_the_tokens_or_a_batch_statistic_broadcast_back_is_no_batch_reduced(pool):
    """Pooling over the tokens keeps the batch; a statistic kept with keepdim and subtracted from the batch
    is not pooling (the batch contract, measured on the values, judges the centring: it mixes the entries)."""
    report = _report(pool)
    assert "batch-reduced" not in [d.kind for d in report.diagnostics]
    assert report.verdict.mark == ("✓" if pool == "mean-tokens" else "✗")


def test_a_batch_statistic_broadcast_back_without_keepdim_is_no_batch_reduced():
    """``h - h.mean(0)`` (a hand-written batch norm): the elementwise math that puts the batch back has no
    row to follow, and the model's output, which has its batch, says so. On e4aae2f two batch-reduced notes
    said "nothing made from it has a batch axis again" of this model, which was false."""
    class Centred(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(32, 32)

        def forward(self, x):
            h = self.lin(x)                                                        # (B, T, D)
            return (h - h.mean(0)) / (h.var(0) + 1e-5).sqrt()                      # (B, T, D)

    x = torch.randn(3, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=3 T=6 D=32 H=4", dependencies=True) as t:
        shapetrace.name(x, "B T D")
        Centred()(x)
    assert [d.kind for d in t.report().diagnostics] == ["batch-entries-mix"]   # (measured on the values)
