"""The dependency contracts beside a list of one number per batch entry (engine/dependencies.py): the
measuring run puts batch entry 0 in every row, so a per-entry list must give entry 0's number to every
row too; a list that is not declared so is not measured (which number goes with which entry cannot be
told, and its length equal to the batch size decides nothing). At distinct sizes and at B = T = H = 4."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace.engine.dependencies import BATCH, CAUSAL, OWN_TOKEN


class PaddedCausalAttention(nn.Module):
    """Causal self-attention whose key padding comes as a Python list of pad counts, one per sequence
    (right padding), turned into a mask as fairseq's ``lengths_to_padding_mask`` does with the lengths
    ``torch.nn.utils.rnn.pack_padded_sequence`` takes as a list; ``bug="and"``: the two masks joined
    with ``&`` where ``|`` was meant (the causal mask hides only padded keys: queries see the future)."""

    def __init__(self, d_model=32, heads=4, bug=None):
        super().__init__()
        self.qkv, self.out = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.heads, self.bug = heads, bug

    def forward(self, x, pad):
        B, T, C = x.shape                                                          # (B, T, C)
        q, k, v = self.qkv(x).split(C, dim=2)                                      # (B, T, C) each
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)              # (B, H, T, d)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)              # (B, H, T, d)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)              # (B, H, T, d)
        padded = torch.tensor([[j >= T - p for j in range(T)] for p in pad])       # (B, T): True on padding
        future = torch.ones(T, T, dtype=torch.bool).triu(1)                        # (T, T)
        if self.bug == "and":
            hidden = padded[:, None, None, :] & future                             # (B, 1, T, T)
        else:
            hidden = padded[:, None, None, :] | future                             # (B, 1, T, T)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))                    # (B, H, T, T)
        att = torch.softmax(att.masked_fill(hidden, float("-inf")), dim=-1)        # (B, H, T, T)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)                             # (B, T, C)
        return self.out(y)


#: (B, T, the pad counts): entry 0 padded, its batch-mates not all alike (at B = T the mask built from the
#: list could be [B, T] or [T, B]: ``?``, and nothing is measured; B = H alone decides no name)
CASES = [(2, 5, [2, 0]), (3, 6, [2, 0, 1])]


def _traced(B, T, pad, bug=None, **asked):
    torch.manual_seed(0)
    model, x = PaddedCausalAttention(bug=bug).eval(), torch.randn(B, T, 32)
    with shapetrace.trace(dims=f"B={B} T={T} D=32 H=4") as t:
        t.check_dependencies(**asked)
        shapetrace.name(x, "B T D")
        model(x, pad)
    return t


@pytest.mark.parametrize(("B", "T", "pad"), [*CASES, (4, 6, [2, 0, 1, 3])])
def test_a_list_as_long_as_the_batch_is_not_measured_unless_declared(B, T, pad):
    # Before: the measuring rows (entry 0, entry 0 with its last token moved) took pad[0] and pad[1],
    # so the moved copy saw keys entry 0 hides, and a correct causal mask read as leaking the future.
    t = _traced(B, T, pad)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert t.report().contracts == []
    assert t.report().verdict.mark == "✓"   # (B = H = 4: the list's mask [B, T] fits one reading)


@pytest.mark.parametrize(("B", "T", "pad"), CASES)
def test_a_declared_per_entry_list_gives_entry_zeros_number_to_every_row(B, T, pad):
    t = _traced(B, T, pad, per_entry=(1,))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert t.report().contracts == [BATCH, OWN_TOKEN, CAUSAL]
    # the mask is built for the traced batch: copies of it, one per head, cannot pass
    assert t.unmeasured == ["heads (the model cannot take a copy of its batch per head)"]


@pytest.mark.parametrize(("B", "T", "pad"), [(2, 5, [0, 2]), (3, 6, [0, 2, 1])])
def test_a_causal_mask_anded_with_the_padding_beside_a_declared_list_still_leaks(B, T, pad):
    # (entry 0 unpadded: the measuring run moves its last token, which the "and" lets earlier queries see)
    t = _traced(B, T, pad, bug="and", per_entry=(1,))
    assert [d.kind for d in t._measured()[0]] == ["causal-mask-leaks"]
    assert t._measured()[0][0].message.startswith(
        "measured on the values: output token 0 of batch 0 depends on input token")
    assert t.report().verdict.mark == "✗"


def test_a_declared_keyword_list_is_found_by_its_name():
    torch.manual_seed(0)
    model, x = PaddedCausalAttention().eval(), torch.randn(2, 5, 32)
    with shapetrace.trace(dims="B=2 T=5 D=32 H=4") as t:
        t.check_dependencies(per_entry=("pad",))
        shapetrace.name(x, "B T D")
        model(x, pad=[2, 0])
    assert t.report().contracts == [BATCH, OWN_TOKEN, CAUSAL]


def _probe(batch: int, tokens: int):
    from shapetrace.engine.dependencies import Probe

    out = torch.zeros(1)
    return Probe(None, (), {}, 0, batch, tokens, batch, tokens, output=out)


@pytest.mark.parametrize(("batch", "tokens"), [(0, 1), (1, 0), (0, 2)])
def test_the_quick_reading_of_token_changes_agrees_with_the_reading_of_every_value(batch, tokens):
    """engine/token_changes.py reads each token's largest change in four ops; the reading of every value
    it replaces must say the same: (B, T, D), (T, B, D) as fairseq's time-first layout, (B, H, T, d)."""
    from shapetrace.engine import token_changes

    torch.manual_seed(0)
    shape = [1, 5, 8] if tokens < 2 else [1, 3, 5, 8]
    if batch == 1:
        shape = [5, 1, 8]
    alone = torch.randn(shape)
    both = torch.cat([alone, alone], batch).clone()                                # (.., 2 on batch, ..)
    moves = torch.zeros_like(both)
    last = [slice(None)] * both.dim()
    last[batch], last[tokens] = 1, 4                                               # entry 1's last token
    moves[tuple(last)] = 1.0
    early = [slice(None)] * both.dim()
    early[batch], early[tokens] = 0, 1                                             # entry 0's token 1, a whisker
    moves[tuple(early)] = 1e-6
    both += moves
    probe = _probe(batch, tokens)
    quick = token_changes._token_changes(alone, both, probe)
    assert quick == token_changes._all_changes(alone, both, probe)
    assert quick == ([[False] * 5], [[False] * 4 + [True]])


def test_a_token_turned_nan_is_read_on_every_value():
    from shapetrace.engine import token_changes

    alone = torch.randn(1, 5, 8)
    both = torch.cat([alone, alone]).clone()                                       # (2, T, D)
    both[1, 2, 0] = float("nan")                                                   # entry 1's token 2 turned NaN
    probe = _probe(0, 1)
    assert token_changes._token_changes(alone, both, probe) is None
    assert token_changes.changes_of(alone, both, probe) == ([[False] * 5], [[False, False, True, False, False]])
