"""The dependency contracts read a module's output where it returns a mapping of tensors, as transformers' models
return a ``ModelOutput`` (``last_hidden_state``, ``logits``: its first tensor, in its fields' order). Before
(1890185 and a1a4dd9), every such model's contracts were "not measured: ... (no tensor goes in and comes out of the
call)", so a bug only the values show went unseen behind a ``✓``. Each test fails there."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace.engine.dependencies import BATCH, OWN_TOKEN


class SelfAttention(nn.Module):
    def __init__(self, width=32, heads=4, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)   # (B, H, T, d_k)
        y = torch.softmax(q @ k.transpose(-2, -1) / (D // self.heads) ** 0.5, dim=-1) @ v          # (B, H, T, d_k)
        y = self.out(y.transpose(1, 2).reshape(B, T, D))                                           # (B, T, D)
        if self.bug == "batch-mean":
            y = y + y.mean(0, keepdim=True)   # (a statistic over the batch added back: entries mix)
        return {"last_hidden_state": y, "attentions": None}


def _report(bug):
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4", dependencies=True) as t:
        SelfAttention(bug=bug).eval()(torch.randn(2, 6, 32))
    return t.report()


def test_a_module_returning_a_mapping_has_its_contracts_measured():
    report = _report("")
    assert report.contracts[:2] == [BATCH, OWN_TOKEN]
    assert not any("no tensor goes in and comes out" in why for why in report.verdict.unmeasured)


def test_batch_entries_mixed_behind_a_mapping_are_found():
    report = _report("batch-mean")
    assert "batch-entries-mix" in [d.kind for d in report.diagnostics if d.severity == "error"]
    assert report.verdict.mark == "✗"


def test_a_transformers_model_output_is_read_by_its_first_tensor():
    transformers = pytest.importorskip("transformers", reason="optional group: pip install transformers")
    config = transformers.BertConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, intermediate_size=128,
                                     vocab_size=101)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=64 H=4", dependencies=True) as t:
        transformers.BertModel(config).eval()(torch.randint(3, 101, (2, 6)), attention_mask=mask)
    report = t.report()
    assert report.verdict.mark == "✓"
    assert report.contracts[:2] == [BATCH, OWN_TOKEN] and "padding stays unread" in report.contracts
