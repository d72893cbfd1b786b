"""The backward's diagnostics (:mod:`shapetrace.engine.backward.checks`): each bug in the style of a public bug
report, checked against what torch itself does with the same code untraced; each with a correct twin that stays
silent."""

from __future__ import annotations

import inspect
import math
import os

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace

BACKWARD_KINDS = {"inplace-on-saved", "parameter-without-grad", "grad-not-contiguous", "grad-dtype-mismatch"}
B, T, D, H = 2, 4, 8, 2
SOURCE = os.path.relpath(__file__)   # as the findings write a call site: relative to the working directory


def _x(seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _traced(model: nn.Module, x: torch.Tensor):
    with shapetrace.trace(f"B={B} T={T} D={D} H={H}", backward=True) as t:
        model(shapetrace.name(x, "B T D"))
    return t


def _kinds(t) -> list[str]:
    return [d.kind for d in t.diagnostics if d.kind in BACKWARD_KINDS]


# -- an in-place write into a tensor autograd saved -------------------------------------------------------

# The Annotated Transformer's attention() with a "safe softmax" that zeroes the padded keys after the softmax,
# in place: the softmax saved its weights for its backward, so torch refuses the backward (yashbonde/dall-e-baby
# issue #1, "Error detected in SoftmaxBackward"; BierOne/bottom-up-attention-vqa issue #6, the same error from an
# in-place dropout). The twin is PyTorch's own masked-softmax fallback (pytorch/pytorch PR #71502), which zeroes
# them out of place: `output.masked_fill(mask_not, 0)`.
class PaddedAttention(nn.Module):
    def __init__(self, in_place: bool):
        super().__init__()
        self.w_q, self.w_k, self.w_v = (nn.Linear(D, D) for _ in range(3))
        self.in_place = in_place

    def forward(self, x):
        mask = torch.ones(B, 1, T, dtype=torch.bool)
        mask[1, :, -1] = False                                              # (B, 1, T): the last key is padding
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)                     # (B, T, D)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)                     # (B, T, T)
        p_attn = scores.masked_fill(mask == 0, -1e9).softmax(dim=-1)        # (B, T, T)
        if self.in_place:
            p_attn.masked_fill_(mask == 0, 0.0)
        else:
            p_attn = p_attn.masked_fill(mask == 0, 0.0)
        return p_attn @ v                                                   # (B, T, D)


def _torchs_refusal(model: nn.Module, x: torch.Tensor) -> str:
    with pytest.raises(RuntimeError) as raised:
        model(x).sum().backward()
    for p in model.parameters():
        p.grad = None
    return str(raised.value)


def test_an_in_place_fill_after_the_softmax_is_refused_before_the_backward_in_torchs_own_words():
    model = PaddedAttention(in_place=True)
    untraced = _torchs_refusal(model, _x())
    assert "which is output 0 of Softmax, is at version 1; expected version 0 instead" in untraced
    t = _traced(model, _x())
    assert t.backward.note == f"the backward failed: RuntimeError: {untraced}"
    assert all(p.grad is None for p in model.parameters())   # no gradient was made, as untraced
    [finding] = [d for d in t.diagnostics if d.kind in BACKWARD_KINDS]
    softmax, fill = (e.index for e in t.events if e.op in ("masked_fill_", "softmax"))
    assert (finding.kind, finding.severity, finding.event, finding.also) == ("inplace-on-saved", "error", fill,
                                                                           (softmax,))
    line = SOURCE
    assert finding.message.startswith(f"#{fill} masked_fill_ ({line}:")
    assert (f"writes in place into the [B, T, T] tensor that #{softmax} softmax ({line}:") in finding.message
    assert finding.message.endswith(
        "saved for its backward (SoftmaxBackward0 needs it: version 0 when saved, 1 now): the backward fails with "
        "\"one of the variables needed for gradient computation has been modified by an inplace operation\".")
    assert finding.fix == "Use `masked_fill`, which returns a new tensor, or write into a `.clone()`."
    assert t.report().verdict.mark == "✗"


def test_the_scripts_own_backward_raises_inside_the_trace_as_it_does_untraced():
    model = PaddedAttention(in_place=True)
    untraced = _torchs_refusal(model, _x())
    with pytest.raises(RuntimeError) as raised, shapetrace.trace(f"B={B} T={T} D={D}", backward=True) as t:
        model(shapetrace.name(_x(), "B T D")).sum().backward()
    assert str(raised.value) == untraced
    assert all(p.grad is None for p in model.parameters())
    assert _kinds(t) == ["inplace-on-saved"]


def test_the_out_of_place_twin_runs_its_backward_and_says_nothing():
    model = PaddedAttention(in_place=False)
    t = _traced(model, _x())
    assert t.backward.note == "" and t.backward.rows
    assert _kinds(t) == []
    assert all(p.grad is not None for p in model.parameters())


# nanoGPT's attention with the dropout on the weights in place, as BierOne/bottom-up-attention-vqa issue #6 had
# it (`nn.Dropout(dropout, inplace=True)` after a ReLU): the dropout overwrites what the softmax saved.
class InPlaceDropoutAttention(PaddedAttention):
    def forward(self, x):
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)                     # (B, T, D)
        att = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(dim=-1)      # (B, T, T)
        att = F.dropout(att, p=0.5, training=True, inplace=self.in_place)   # (B, T, T)
        return att @ v                                                      # (B, T, D)


def test_an_in_place_dropout_on_the_weights_is_named_as_the_write():
    torch.manual_seed(0)
    t = _traced(InPlaceDropoutAttention(in_place=True), _x())
    [finding] = [d for d in t.diagnostics if d.kind in BACKWARD_KINDS]
    dropout = next(e.index for e in t.events if e.op == "dropout")
    assert finding.event == dropout and finding.message.startswith(f"#{dropout} dropout (")
    assert "Write into a `.clone()` of the tensor instead." == finding.fix
    torch.manual_seed(0)
    assert _kinds(_traced(InPlaceDropoutAttention(in_place=False), _x())) == []


# -- a parameter that gets no gradient -------------------------------------------------------------------

# custom-diffusion's cross-attention (adobe-research/custom-diffusion issue #80) detaches the keys and values of
# every token but the first: `key = detach*key + (1-detach)*key.detach()`, so to_k still learns from that one
# token (the twin). Detaching all of them (bboylyg/NAD issue #8: a `.detach()` before the loss that should
# train) leaves to_k without a gradient. Gradients off around the projection (LunaBlack/KGAT-pytorch issue #15,
# "Why use torch.no_grad() when computing attention?") and the weight read through `.data` (the
# `attn.data.masked_fill_` of jadore801120/attention-is-all-you-need-pytorch issue #16, on a weight) do the same.
class KeyCut(nn.Module):
    def __init__(self, how: str):
        super().__init__()
        self.to_q, self.to_k, self.to_v = (nn.Linear(D, D, bias=False) for _ in range(3))
        self.how = how

    def forward(self, x):
        q, v = self.to_q(x), self.to_v(x)                                   # (B, T, D)
        if self.how == "detach":
            key = self.to_k(x).detach()                                     # (B, T, D)
        elif self.how == "no_grad":
            with torch.no_grad():
                key = self.to_k(x)                                          # (B, T, D)
        elif self.how == "data":
            key = F.linear(x, self.to_k.weight.data)                        # (B, T, D)
        else:   # custom-diffusion: every key but the first is detached
            key = self.to_k(x)                                              # (B, T, D)
            detach = torch.ones_like(key)
            detach[:, :1, :] = detach[:, :1, :] * 0.0
            key = detach * key + (1 - detach) * key.detach()                # (B, T, D)
        att = (q @ key.transpose(-2, -1) / math.sqrt(D)).softmax(dim=-1)   # (B, T, T)
        return att @ v                                                      # (B, T, D)


@pytest.mark.parametrize(("how", "message", "fix"), [
    ("detach", "to_k.weight gets no gradient: its path to the loss is cut at a detach ({}:{}): "
               "`.detach()` returns a tensor outside autograd.",
     "Drop the `.detach()` (keep it only where no gradient may flow back)."),
    ("no_grad", "to_k.weight gets no gradient: it is used at #{} linear ({}:{}) with gradients "
                "off (a `torch.no_grad()` block).",
     "Run that call with gradients on (keep `torch.no_grad()` for evaluation and weight updates)."),
    ("data", "to_k.weight gets no gradient: #{} linear ({}:{}) reads its memory through a "
             "tensor outside autograd (`to_k.weight.data` or a `.detach()`), so the backward cannot reach it.",
     "Use the parameter itself there, not `to_k.weight.data`."),
])
def test_a_parameter_cut_from_the_graph_is_said_with_the_call_that_cut_it(how, message, fix):
    model = KeyCut(how)
    untraced = KeyCut(how)
    untraced.load_state_dict(model.state_dict())
    untraced(_x()).sum().backward()
    assert untraced.to_k.weight.grad is None and untraced.to_q.weight.grad is not None   # torch agrees
    t = _traced(model, _x())
    [finding] = [d for d in t.diagnostics if d.kind in BACKWARD_KINDS]
    assert (finding.kind, finding.severity, finding.fix) == ("parameter-without-grad", "warning", fix)
    source = inspect.getsource(KeyCut.forward).splitlines()
    first = KeyCut.forward.__code__.co_firstlineno
    line = first + next(i for i, s in enumerate(source) if f'"{how}"' in s) + (2 if how == "no_grad" else 1)
    linear = next((e.index for e in t.events if e.op == "linear" and e.index == finding.event), None)
    expected = message.format(SOURCE, line) if how == "detach" else message.format(linear, SOURCE, line)
    assert finding.message == expected
    assert finding.event == (None if how == "detach" else linear)
    assert t.report().verdict.mark == "!"


def test_keys_detached_but_one_still_train_the_key_projection_and_say_nothing():
    model = KeyCut("partial")
    t = _traced(model, _x())
    assert _kinds(t) == [] and model.to_k.weight.grad is not None


def test_a_frozen_projection_is_not_a_parameter_without_grad():
    # a deliberately frozen layer (requires_grad_(False), as for a pretrained encoder) gets no gradient by design
    model = KeyCut("no_grad")
    model.to_k.requires_grad_(False)
    assert _kinds(_traced(model, _x())) == []


# -- a parameter's gradient: its layout and dtype ---------------------------------------------------------

# transformers' GPT-2 keeps c_attn's weight as a Conv1D, [in, out]; nanoGPT's from_pretrained copies it into an
# nn.Linear's [out, in] weight with `sd[k].copy_(sd_hf[k].t())` (the twin). Wrapping the transpose itself as the
# parameter (`nn.Parameter(w.t())`) makes a parameter, and so its gradient, with strides (1, out): the layout
# behind DDP's "Grad strides do not match bucket view strides" (whai362/PVT issue #51, pytorch/pytorch #47163).
def _gpt2_projection(copy: bool) -> nn.Linear:
    conv1d_weight = torch.randn(D, 3 * D, generator=torch.Generator().manual_seed(1))   # (D, 3D): Conv1D's
    lin = nn.Linear(D, 3 * D)
    if copy:
        with torch.no_grad():
            lin.weight.copy_(conv1d_weight.t())
    else:
        lin.weight = nn.Parameter(conv1d_weight.t())                       # (3D, D), strides (1, 3D)
    return lin


def test_a_transposed_parameter_has_a_gradient_that_is_not_contiguous():
    lin = _gpt2_projection(copy=False)
    t = _traced(lin, _x())
    assert lin.weight.grad.stride() == (1, 3 * D) == lin.weight.stride()   # torch's layout contract
    [finding] = [d for d in t.diagnostics if d.kind in BACKWARD_KINDS]
    assert (finding.kind, finding.severity, finding.event) == ("grad-not-contiguous", "warning", None)
    assert finding.message == (
        "weight.grad [3*D, D] is not contiguous (strides (1, 24)): autograd gives a parameter's gradient the "
        "parameter's own strides, and this parameter is not contiguous; `weight.grad.view(-1)` fails, and code "
        "that flattens gradients must copy it at every step.")
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        lin.weight.grad.view(-1)
    assert t.report().verdict.mark == "!"


def test_the_copied_weight_of_nanogpt_has_a_contiguous_gradient_and_says_nothing():
    lin = _gpt2_projection(copy=True)
    assert _kinds(_traced(lin, _x())) == [] and lin.weight.grad.is_contiguous()


# Casting the weights through `.data` after a backward leaves the old gradients in the old dtype, and every later
# backward adds into them there (Lightning-AI/pytorch-lightning issue #16303, "Found dtype Half but expected Float
# in optimizer"); `model.to(dtype)` converts the gradients too (the twin).
@pytest.mark.parametrize("through_data", [True, False])
def test_a_weight_cast_through_data_keeps_a_gradient_of_the_old_dtype(through_data):
    model = KeyCut("plain")
    model(_x()).sum().backward()
    if through_data:
        for p in model.parameters():
            p.data = p.data.to(torch.float64)
    else:
        model.to(torch.float64)
    t = _traced(model, _x(dtype=torch.float64))
    found = [d for d in t.diagnostics if d.kind in BACKWARD_KINDS]
    if not through_data:
        assert found == [] and model.to_q.weight.grad.dtype == torch.float64
        return
    assert model.to_q.weight.grad.dtype == torch.float32 and model.to_q.weight.dtype == torch.float64
    assert [(d.kind, d.severity) for d in found] == [("grad-dtype-mismatch", "warning")] * 3
    assert found[0].message == (
        "to_q.weight.grad is float32 but to_q.weight is float64: the gradient was made before the parameter's dtype "
        "changed (assigning `.data` changes the parameter only), and each backward adds into it in float32.")


# BERT's _init_weights (transformers' BertPreTrainedModel) writes the weights through `.data`
# (`module.weight.data.normal_(mean=0.0, std=...)`, `module.bias.data.zero_()`): a write while the model is built,
# never a read in its forward. A parameter the loss does not reach (the pooler, when the loss reads the tokens
# only) gets no gradient, but no cut is to blame: nothing is said, rather than a false cause.
class InitThroughData(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense, self.pooler = nn.Linear(D, D), nn.Linear(D, D)
        for module in (self.dense, self.pooler):
            module.weight.data.normal_(mean=0.0, std=0.02)
            module.bias.data.zero_()

    def forward(self, x):
        self.pooler(x[:, 0])              # (B, D): computed, not part of what the backward starts from
        return self.dense(x)              # (B, T, D)


def test_weights_written_through_data_at_init_are_not_blamed_for_a_missing_gradient():
    with shapetrace.trace(f"B={B} T={T} D={D}", backward=True) as t:
        model = InitThroughData()
        model(shapetrace.name(_x(), "B T D"))
    assert model.pooler.weight.grad is None and model.dense.weight.grad is not None
    assert _kinds(t) == []


def test_a_whole_gpt2_training_step_from_transformers_has_no_backward_finding():
    # transformers' GPT2LMHeadModel with labels (its own shifted cross-entropy), the step's own loss.backward():
    # weight tying (lm_head.weight is wte.weight), Conv1D weights, a causal-mask buffer: every parameter gets a
    # contiguous gradient of its own dtype, and nothing it saved is overwritten
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (optional)")
    config = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=16, vocab_size=64,
                                     attn_implementation="eager")
    torch.manual_seed(0)
    model, ids = transformers.GPT2LMHeadModel(config).train(), torch.randint(0, 64, (2, 8))
    with shapetrace.trace("B=2 T=8 D=32 H=4", backward=True) as t:
        model(ids, labels=ids).loss.backward()
    assert t.backward.note == "" and t.backward.runs == 1
    assert _kinds(t) == []
    assert all(p.grad is not None and p.grad.is_contiguous() for p in model.parameters())
