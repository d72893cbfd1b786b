"""The padding contract, measured on the values (engine/padding.py): a padded batch entry's real tokens' outputs
(and a pooled output) never change when only its padding changes. Correct models with padding hold it
(nn.MultiheadAttention's ``key_padding_mask``, a BERT-style extended mask ``(1 - mask) * min``, a left-padded
GPT-2 style with positions from the mask, masked mean pooling); their buggy twins break it with the finding's
exact words. Each fails on d4a212b (main: no such contract, no ``padding-read`` kind)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace.engine.dependencies import BATCH
from shapetrace.engine.padding import PADDING

B, T, D, H = 2, 6, 32, 4


class MHAEncoder(nn.Module):
    """Two ``nn.MultiheadAttention`` layers given ``key_padding_mask`` (True: padding); bug ``second-unmasked``:
    the mask passed to the first only."""

    def __init__(self, bug=""):
        super().__init__()
        self.a1 = nn.MultiheadAttention(D, H, batch_first=True)
        self.a2 = nn.MultiheadAttention(D, H, batch_first=True)
        self.bug = bug

    def forward(self, x, pad):                                                     # (B, T, D), (B, T)
        x = x + self.a1(x, x, x, key_padding_mask=pad, need_weights=False)[0]     # (B, T, D)
        second = None if self.bug == "second-unmasked" else pad
        return x + self.a2(x, x, x, key_padding_mask=second, need_weights=False)[0]


class BertLayer(nn.Module):
    """A BERT-style self-attention: the extended mask ``(1 - mask[:, None, None, :]) * finfo.min`` on the
    scores; ``pool``: "mean" (masked mean pooling), "plain-mean" (the bug: a mean over every token, the pads
    too), "cls" (token 0, masked correctly), else the token outputs; bug ``mask-unused``: the mask never added."""

    def __init__(self, pool="", bug=""):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.pool, self.bug = pool, bug

    def forward(self, x, attention_mask):                                          # (B, T, D), (B, T)
        Bx, Tx, _ = x.shape
        q, k, v = (p(x).view(Bx, Tx, H, D // H).permute(0, 2, 1, 3) for p in (self.q, self.k, self.v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(D // H)                      # (B, H, T, T)
        extended = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        if self.bug != "mask-unused":
            scores = scores + extended                                             # (B, H, T, T)
        h = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(Bx, Tx, D)       # (B, T, D)
        h = self.o(h) + x
        if self.pool == "mean":
            m = attention_mask[..., None].to(h.dtype)                              # (B, T, 1)
            return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)                       # (B, D)
        if self.pool == "plain-mean":
            return h.mean(1)                                                       # (B, D)
        return h[:, 0] if self.pool == "cls" else h


class LeftPaddedGPT2(nn.Module):
    """GPT-2 style: ids, positions from the mask (``cumsum - 1``, its pads filled by ``masked_fill``), a causal
    ``tril`` by ``where`` with the dtype's minimum and ``(1 - mask) * min`` added; the first entry left-padded.
    Bug ``causal-only``: the padding mask not added to the scores (the pads read as text)."""

    def __init__(self, bug=""):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(50, D), nn.Embedding(T, D)
        self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.register_buffer("bias", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T))
        self.bug = bug

    def forward(self, ids, attention_mask):                                        # (B, T), (B, T)
        Bx, Tx = ids.shape
        positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)   # (B, T)
        x = self.wte(ids) + self.wpe(positions)                                    # (B, T, D)
        q, k, v = self.c_attn(x).split(D, dim=2)
        q, k, v = (t.view(Bx, Tx, H, D // H).permute(0, 2, 1, 3) for t in (q, k, v))   # (B, H, T, d)
        w = q @ k.transpose(-1, -2) / math.sqrt(D // H)                           # (B, H, T, T)
        lowest = torch.finfo(w.dtype).min
        w = torch.where(self.bias[:, :, :Tx, :Tx], w, torch.tensor(lowest, dtype=w.dtype))
        if self.bug != "causal-only":
            w = w + (1.0 - attention_mask[:, None, None, :].to(w.dtype)) * lowest
        y = (w.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(Bx, Tx, D)            # (B, T, D)
        return self.c_proj(y)


def _right_padded(dtype=torch.long):
    mask = torch.ones(B, T, dtype=dtype)
    mask[1, T - 2:] = 0                                                            # the second entry padded by two
    return mask


def _report(model, x, mask, x_dims="B T D", key=None):
    torch.manual_seed(1)
    with shapetrace.trace(dims=f"B={x.shape[0]} T={T} D={D} H={H}") as t:
        t.check_dependencies()
        shapetrace.name(x, x_dims)
        shapetrace.name(mask, "B T")
        model(x, **{key: mask}) if key else model(x, mask)
    return t.report()


def _floats():
    torch.manual_seed(0)
    return torch.randn(B, T, D)


def _padding_findings(report):
    return [d for d in report.diagnostics if d.kind == "padding-read"]


def test_multihead_attention_with_key_padding_mask_holds():
    torch.manual_seed(0)
    report = _report(MHAEncoder().eval(), _floats(), _right_padded(torch.bool).logical_not())   # (True: padding)
    assert _padding_findings(report) == []
    assert PADDING in report.contracts and report.contracts[0] == BATCH


def test_a_key_padding_mask_passed_to_one_attention_of_two_is_read():
    torch.manual_seed(0)
    report = _report(MHAEncoder("second-unmasked").eval(), _floats(), _right_padded(torch.bool).logical_not())
    found = _padding_findings(report)
    assert PADDING not in report.contracts
    assert len(found) == 1 and found[0].severity == "error"
    assert found[0].message == (
        "measured on the values: the output at real token 0 of batch entry 1 changes when only the padding of "
        "that entry changes (4 real tokens in all): the tokens where pad is 1, as its unpadded rows read (they "
        "hold 0); read the other way, moving only the tokens where it is 0, output token 4 changes. Whichever "
        "value marks the padding, a real token reads it: the mask is not passed to one of the attentions, is "
        "inverted for some rows, or a pooled token reads the pads.")
    assert found[0].fix == ("Pass pad to every attention (and pooling) that reads these tokens, each key padding "
                            "position hidden from every real query (a CLS or pooled token included).")


@pytest.mark.parametrize("pool", ["", "cls", "mean"])
def test_a_bert_style_extended_mask_holds(pool):
    torch.manual_seed(0)
    report = _report(BertLayer(pool).eval(), _floats(), _right_padded())
    assert _padding_findings(report) == []
    assert PADDING in report.contracts


def test_a_mean_over_the_pads_too_is_read():
    torch.manual_seed(0)
    report = _report(BertLayer("plain-mean").eval(), _floats(), _right_padded())
    (found,) = _padding_findings(report)
    assert found.message == (
        "measured on the values: the output of batch entry 1 (it has no token axis) changes when only the padding "
        "of that entry changes: the tokens where attention_mask is 0, as its unpadded rows read (they hold 1); "
        "read the other way, moving only the tokens where it is 1, it changes too. Whichever value marks the "
        "padding, a real token reads it: the mask is not passed to one of the attentions, is inverted for some "
        "rows, or a pooled token reads the pads.")


def test_a_left_padded_gpt2_with_positions_from_the_mask_holds():
    torch.manual_seed(0)
    ids = torch.randint(1, 50, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, :2] = 0                                                                # the first entry left-padded
    report = _report(LeftPaddedGPT2().eval(), ids, mask, "B T")
    assert _padding_findings(report) == []
    assert PADDING in report.contracts


def test_a_left_padded_gpt2_without_its_padding_mask_is_read():
    torch.manual_seed(0)
    ids = torch.randint(1, 50, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, :2] = 0
    report = _report(LeftPaddedGPT2("causal-only").eval(), ids, mask, "B T")
    (found,) = _padding_findings(report)
    assert found.message == (
        "measured on the values: the output at real token 2 of batch entry 0 changes when only the padding of "
        "that entry changes (4 real tokens in all): the tokens where attention_mask is 0, as its unpadded rows "
        "read (they hold 1); read the other way, moving only the tokens where it is 1, nothing changes, but those "
        "are the later tokens, which the causal mask alone keeps unread. Whichever value marks the padding, a "
        "real token reads it: the mask is not passed to one of the attentions, is inverted for some rows, or a "
        "pooled token reads the pads.")


class SdpaBool(nn.Module):
    """SDPA with a boolean ``attn_mask`` from the ``[B, T]`` mask (True attends); bug ``row-inverted``: the
    second entry's row inverted (its real tokens hidden, its pads shown)."""

    def __init__(self, bug=""):
        super().__init__()
        self.qkv, self.bug = nn.Linear(D, 3 * D), bug

    def forward(self, x, attention_mask):                                          # (B, T, D), (B, T)
        Bx, Tx, _ = x.shape
        q, k, v = (t.view(Bx, Tx, H, D // H).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))   # (B, H, T, d)
        m = attention_mask[:, None, None, :].bool()                                # (B, 1, 1, T)
        if self.bug == "row-inverted":
            m = m ^ torch.tensor([False, True]).view(2, 1, 1, 1)                   # (B, 1, 1, T): row 1 flipped
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)      # (B, H, T, d)
        return y.transpose(1, 2).reshape(Bx, Tx, D)


class TokenTypes(nn.Module):
    """A ``[B, T]`` 0/1 companion that is no padding mask: token types looked up in a table and added."""

    def __init__(self):
        super().__init__()
        self.types, self.attn = nn.Embedding(2, D), nn.MultiheadAttention(D, H, batch_first=True)

    def forward(self, x, token_type_ids):                                          # (B, T, D), (B, T)
        x = x + self.types(token_type_ids)                                         # (B, T, D)
        return self.attn(x, x, x, need_weights=False)[0]


def test_an_sdpa_boolean_attn_mask_holds():
    report = _report(SdpaBool().eval(), _floats(), _right_padded())
    assert _padding_findings(report) == [] and PADDING in report.contracts


def test_a_row_read_the_other_way_round_is_not_measured():
    # (the padded entry's real tokens hidden and its pads shown: which value the model takes for padding in
    # that row is not the one its unpadded rows give, so nothing is claimed either way)
    report = _report(SdpaBool("row-inverted").eval(), _floats(), _right_padded())
    assert _padding_findings(report) == [] and PADDING not in report.contracts
    assert "padding stays unread (the model hides the tokens where attention_mask is 1, the value its unpadded " \
           "rows hold: which value marks the padding cannot be told)" in report.unmeasured


def test_a_token_type_table_is_no_padding_mask():
    # (its rows are one run of each value, an unpadded row beside: only its use tells it is no mask; on the
    # first draft, which read no use, this correct model was a false padding-read)
    types = torch.zeros(B, T, dtype=torch.long)
    types[1, 3:] = 1
    report = _report(TokenTypes().eval(), _floats(), types)
    assert _padding_findings(report) == [] and PADDING not in report.contracts
    assert "padding stays unread (token_type_ids never reaches a mask on the scores nor is multiplied into the " \
           "values)" in report.unmeasured


def test_unpadded_rows_that_disagree_decide_nothing():
    # (a row of ones and a row of zeros beside a padded one: which value is the real tokens' cannot be told)
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0]])
    report = _report(BertLayer().eval(), torch.randn(3, T, D), mask)
    assert _padding_findings(report) == [] and PADDING not in report.contracts
    assert "padding stays unread (the unpadded rows of attention_mask hold 0 in some and 1 in others)" \
        in report.unmeasured


class ConvThenAttention(nn.Module):
    """A conformer-style depthwise convolution over the tokens (its pads not zeroed first, as models that accept
    that write it), then ``nn.MultiheadAttention`` given ``key_padding_mask``: the last real token reads the first
    pad through the kernel, and every real token reads the last real one. Bug ``mean-over-pads``: the outputs
    pooled by a plain mean over every position, the pads included (every pad read, the farthest too)."""

    def __init__(self, bug=""):
        super().__init__()
        self.conv = nn.Conv1d(D, D, 3, padding=1, groups=D)
        self.attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.bug = bug

    def forward(self, x, pad):                                                     # (B, T, D), (B, T)
        x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)                       # (B, T, D)
        x = x + self.attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]   # (B, T, D)
        return x.mean(1) if self.bug == "mean-over-pads" else x                    # (B, D) or (B, T, D)


def test_a_convolution_that_reads_only_the_pads_next_to_the_real_tokens_is_no_finding():
    """The kernel reads the first pad from the last real token; the farthest pad, moved alone, changes no real
    token's output: the read is the kernel's across the padding's edge, not a missing mask. No finding, and the
    verdict says why the contract was not measured. On eefe532 a ``padding-read`` warning (``!``): the test
    that stood here asserted that warning on this correct model (a false warning, tests/corpus/reports24's caml
    file is the same construct)."""
    torch.manual_seed(0)
    report = _report(ConvThenAttention().eval(), _floats(), _right_padded(torch.bool).logical_not())
    assert _padding_findings(report) == []
    assert "padding stays unread (the model's conv1d reads the pads next to the real tokens; the farthest pad, " \
           "moved alone, changes nothing they give)" in report.unmeasured
    assert PADDING not in report.contracts and report.verdict.mark != "!"


def test_a_convolution_beside_a_read_of_every_pad_is_a_warning_that_says_so():
    """Measured, but not proven a missing mask: with a convolution in the model the read may be the kernel's
    across the padding's edge, which such models accept. Where the farthest pad is read too (a mean over every
    position), a warning (``!``, never ``✓``), never an error."""
    torch.manual_seed(0)
    report = _report(ConvThenAttention("mean-over-pads").eval(), _floats(), _right_padded(torch.bool).logical_not())
    (found,) = _padding_findings(report)
    assert found.severity == "warning"
    assert found.message.endswith(
        "or a pooled token reads the pads. The model also runs conv1d, which reads each token's neighbours: a "
        "real token next to the padding reads it there too, which models that do not zero their pads first "
        "accept.")
    assert not [d for d in report.diagnostics if d.severity == "error"]
    assert report.verdict.mark == "!"
