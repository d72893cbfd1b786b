"""The verdict: one line, a ✓ only where every op that could carry a layout bug was checked (issue 33
item 1), notes under it, never in its place (issue 35)."""

from __future__ import annotations

import io
import json

import pytest
import torch
from einops import rearrange
from rich.console import Console
from torch import nn

import shapetrace
from shapetrace import NOT_ASKED
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.verdict import NOTHING_NAMED, unchecked_ops, verdict_of
from shapetrace.render.table import print_trace

#: what a Python trace's verdict adds where nobody asked for the dependency contracts
UNASKED = f"; not measured: {NOT_ASKED}"


def _attention(x, H, mask=None, literal=False):
    B, T, D = x.shape                                               # (B, T, D)
    q = x.view(B, T, H, D // H).transpose(1, 2)                     # (B, H, T, d_k)
    scores = q @ q.transpose(-2, -1)                                # (B, H, T, T)
    n = int(T) if literal else T   # a plain number, or the size read from x's token axis
    if mask is not None:
        scores = scores.masked_fill(mask[:, :, :n, :n] == 0, float("-inf"))   # nanoGPT's bias buffer
    return scores.softmax(dim=-1)


def _printed(report, width: int = 200) -> str:
    out = io.StringIO()
    print_trace(report, Console(file=out, width=width, color_system=None, legacy_windows=False))
    return out.getvalue()


class _Attention(torch.nn.Module):
    """:func:`_attention` as a module: what the dependency contracts run again on perturbed copies."""

    def __init__(self, heads: int):
        super().__init__()
        self.heads = heads

    def forward(self, x):
        B, T, D = x.shape                                           # (B, T, D)
        v = x.view(B, T, self.heads, D // self.heads).transpose(1, 2)   # (B, H, T, d_k)
        return (_attention(x, self.heads) @ v).transpose(1, 2).reshape(B, T, D)   # (B, T, D)


def test_every_axis_named_gets_the_check_mark():
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3)
    v = t.report().verdict
    assert (v.mark, v.checked, v.total, v.unchecked) == ("✓", 5, 5, ())
    assert v.line == ("✓ checked all 5 ops that could carry a layout bug: every axis keeps its meaning from "
                      "input to output" + UNASKED)
    assert " ".join(_printed(t.report()).split()).endswith(v.line)   # (wrapped at 100 columns)


def test_an_unnamed_mask_slice_is_a_question_mark_naming_the_op():
    """A [1, 1, 8, 8] buffer sliced by plain numbers (``self.bias[:, :, :5, :5]``): its slice has no
    names, so it was not checked and the verdict says so; no check mark. (A sliding window, the last 3
    keys: its values hide more than the future keys, so they do not check it either; nor its width, which no
    module holds: the ``not proven`` clause since the commit after b2f62da, engine/rules/directions.window_widths.)"""
    ones = torch.ones(8, 8)
    bias = (torch.tril(ones) - torch.tril(ones, -3)).view(1, 1, 8, 8)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3, bias, literal=True)
    ops = {e.index: e.op for e in t.events}
    missing = unchecked_ops(t.events)
    # (and the masked_fill that lines the unnamed slice up with the scores: nothing checked how; 99fc103
    # counted it checked, its output's axes being named)
    assert [ops[i] for i in missing] == ["__getitem__", "masked_fill"]
    v = t.report().verdict
    assert v.mark == "?"
    assert v.line == (f"? checked 5 of 7 ops that could carry a layout bug; not checked (unnamed axes): "
                      f"#{missing[0]} __getitem__, #{missing[1]} masked_fill; not proven: a sliding window's width "
                      "read on a mask's values is not one the model's modules hold, or one they hold is applied by "
                      "no mask; no errors or warnings in what was checked" + UNASKED)


def test_an_unnamed_causal_mask_slice_is_checked_on_its_values():
    """The same slice of nanoGPT's ``tril`` buffer: the keys it hides, read on the scores, are exactly
    those after each query, so its effect is read whole and the op that sliced it is checked on the
    values (:mod:`shapetrace.engine.value_checked`), and the line says so."""
    bias = torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3, bias, literal=True)
    assert unchecked_ops(t.events) == []
    assert t.report().verdict.line == ("✓ checked all 7 ops that could carry a layout bug (1 of them on the values of "
                                       "the rotary tables or causal masks they build): every axis keeps its meaning "
                                       "from input to output" + UNASKED)


def test_a_mask_sliced_by_sizes_read_from_the_tokens_is_named_and_checked():
    """nanoGPT's ``self.bias[:, :, :T, :T]`` with ``B, T, C = x.size()``: each slice runs from 0 to a
    size read from the token axis, so its rows and columns are T (issue 33 item 2), and every op is checked."""
    bias = torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3, bias)
    sliced = next(e for e in t.events if e.op == "__getitem__")
    assert sliced.outputs[0].dims == (None, None, "T", "T")
    assert t.report().verdict.line == ("✓ checked all 7 ops that could carry a layout bug: every axis keeps its "
                                       "meaning from input to output" + UNASKED)


def test_nothing_named_is_never_a_check_mark():
    """Issue 33: "✓ … 21 of 21 ops have unnamed axes" was a check mark where nothing was checked."""
    with shapetrace.trace() as t:
        torch.randn(2, 5, 24).view(2, 5, 3, 8).transpose(1, 2).cumsum(1)
    v = t.report().verdict
    assert (v.mark, v.checked, v.line) == ("?", 0, NOTHING_NAMED.removesuffix(".") + UNASKED)


def test_errors_make_a_cross_and_the_count():
    d = [Diagnostic("error", "mixed-axis", 0, "m"), Diagnostic("warning", "w", 1, "m"),
         Diagnostic("note", "n", None, "m")]
    assert verdict_of([], d).line == "✗ 1 error and 1 warning: the findings above say where and how to fix them"
    assert verdict_of([], d[1:]).mark == "!"


def test_a_note_goes_under_the_verdict_never_in_its_place():
    """Issue 35: the Annotated Transformer at T = H with names from sizes ended with the note
    ``ambiguous-sizes`` and no verdict. Now: one verdict line (a ?: names guessed from equal sizes are
    not proven), then the note. (At B = T = 4: the input ``[4, 4, 16]`` is read ``[B, T, D]`` or ``[T, B, D]``;
    at T = H alone it fits one reading, chooses nothing and says nothing: test_diagnose.)"""
    with shapetrace.trace(dims="B=4 T=4 D=16 H=4") as t:
        _attention(torch.randn(4, 4, 16), 4)
    report = t.report()
    assert [d.kind for d in report.diagnostics] == ["ambiguous-sizes"]
    v = report.verdict
    assert v.mark == "?" and v.unproven == ("names were found from sizes alone, and equal sizes are ambiguous",)
    assert v.line == ("? checked 0 of 5 ops that could carry a layout bug; not checked (unnamed axes): #0 view, "
                      "#1 transpose, #2 transpose, #3 matmul and 1 more; not proven: names were found from "
                      "sizes alone, and equal sizes are ambiguous; no errors or warnings in what was checked" + UNASKED)
    printed = _printed(report, width=600)
    assert printed.count(v.line) == 1
    after = printed[printed.index(v.line) + len(v.line):].lstrip("\n")
    assert after.startswith("i note ambiguous-sizes: B = T = 4: names found from sizes alone are ambiguous.")


def test_the_verdict_is_in_the_json():
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3)
    data = json.loads(t.to_json())
    assert data["verdict"] == {"mark": "✓", "line": t.report().verdict.line, "checked": 5, "total": 5,
                               "unchecked": [], "errors": 0, "warnings": 0, "unproven": [], "contracts": [],
                               "unmeasured": [NOT_ASKED], "raised": None, "stopped": None}


def test_a_python_trace_says_when_nobody_asked_for_the_dependency_contracts():
    """The CLI measures the dependency contracts after every traced script; a Python trace only when asked.
    Not asked, its check mark said nothing of them (99fc103): ``✓ … from input to output``, as if measured."""
    x = torch.randn(2, 5, 24)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3", dependencies=True) as t:
        _Attention(3)(x)
    v = t.report().verdict
    assert (v.mark, v.unmeasured) == ("✓", ())
    assert v.contracts == ("batch entries stay apart", "each token depends on itself", "heads stay apart")
    assert v.line == ("✓ checked all 10 ops that could carry a layout bug: every axis keeps its meaning from input "
                      "to output; held on the values: batch entries stay apart, each token depends on itself, "
                      "heads stay apart")
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _Attention(3)(x)
    assert t.report().verdict.unmeasured == (NOT_ASKED,)
    assert t.unmeasured == [NOT_ASKED] == ["the dependency contracts (not asked for: "
                                           "shapetrace.trace(..., dependencies=True) measures them)"]
    # asked for, but the block called plain functions: no module to run again, and the line says so (on
    # 1123aec a function-only script under `shapetrace trace` was `✓` with nothing said of them)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3", dependencies=True) as t:
        _attention(x, 3)
    assert t.unmeasured == ["the dependency contracts (no nn.Module was called to run again on perturbed copies)"]


# -- a trace whose code raised: ✗, with what it raised and how many recorded ops ran before it --------

def test_code_that_raised_before_any_op_is_a_cross_saying_what_and_it_propagates():
    # a GPT built with a wrong keyword (nanoGPT's GPTConfig(n_heads=...) for n_head): the model call raises
    # before any op; the verdict said "? nothing was checked: no op ... was recorded"
    with pytest.raises(TypeError, match="n_heads"), shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        raise TypeError("GPTConfig.__init__() got an unexpected keyword argument 'n_heads'\x1b[31m\n\tsee docs")
    v = t.report().verdict
    assert (v.mark, v.ran_before) == ("✗", 0)
    assert v.line == ("✗ the traced code raised TypeError: GPTConfig.__init__() got an unexpected keyword "
                      "argument 'n_heads'[31m see docs (before any recorded op)")
    assert t.report().to_dict()["verdict"]["raised"] == ("TypeError: GPTConfig.__init__() got an unexpected "
                                                          "keyword argument 'n_heads'[31m see docs")


def test_code_that_raised_after_clean_ops_is_never_a_check_mark():
    # the attention ran and named every axis, then the caller's own code raised (a loss on a wrong target):
    # every recorded op was clean, and the verdict was ✓ as if the run had ended
    with pytest.raises(ValueError), shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3)
        raise ValueError("Expected input batch_size (10) to match target batch_size (2).")
    assert t.report().verdict.line == ("✗ the traced code raised ValueError: Expected input batch_size (10) to "
                                       "match target batch_size (2). (after 5 recorded ops)")
    assert "✗ the traced code raised ValueError" in _printed(t.report())


def test_an_op_that_raised_is_not_counted_among_the_ops_before_it():
    # the Annotated Transformer's scores with a key of the wrong width: the matmul itself raises
    x = torch.randn(2, 5, 24)
    with pytest.raises(RuntimeError), shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        q = x.view(2, 5, 3, 8).transpose(1, 2)                      # (B, H, T, d_k)
        q @ x                                                       # (B, H, T, d_k) @ (B, T, D): refused
    v = t.report().verdict
    assert (v.mark, v.ran_before, t.events[-1].error is not None) == ("✗", 2, True)
    assert v.line == ("✗ the traced code raised RuntimeError: The size of tensor a (3) must match the size of "
                      "tensor b (2) at non-singleton dimension 1 (after 2 recorded ops); 1 error: the findings above "
                      "say where and how to fix it")


def test_a_raise_with_findings_says_both():
    v = verdict_of([], [Diagnostic("error", "mixed-axis", 0, "m")], exception=KeyboardInterrupt())
    assert v.line == ("✗ the traced code raised KeyboardInterrupt (before any recorded op); 1 error: the findings "
                      "above say where and how to fix it")


def test_a_long_message_is_cut_and_a_message_that_cannot_be_read_is_said():
    class Odd(Exception):
        def __str__(self):
            raise ValueError("no")

    assert verdict_of([], [], exception=Odd()).raised == "Odd: (its message cannot be shown: str() raised ValueError)"
    raised = verdict_of([], [], exception=RuntimeError("x" * 400)).raised
    assert raised == "RuntimeError: " + "x" * 299 + "…"


def test_a_run_stopped_before_its_end_is_never_a_check_mark():
    """What ran was all checked and clean, but a run stopped early (Ctrl-C, a limit) never reached its
    output: ``?`` with what stopped it; findings still decide ``✗`` and ``!``; nothing ran: said so."""
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3)
    v = verdict_of(t.events, [], stopped="--max-ops 5")
    assert (v.mark, v.stopped, v.to_dict()["stopped"]) == ("?", "--max-ops 5", "--max-ops 5")
    assert v.line == ("? stopped by --max-ops 5 after 5 recorded ops, the rest of the code not seen: checked 5 of 5 "
                      "ops that could carry a layout bug; no errors or warnings in what was checked")
    error = Diagnostic("error", "mixed-axis", 0, "m")
    assert verdict_of(t.events, [error], stopped="Ctrl-C").line == \
        "✗ 1 error: the findings above say where and how to fix it"
    assert verdict_of([], [], stopped="Ctrl-C").line == \
        "? stopped by Ctrl-C after 0 recorded ops, the rest of the code not seen: no op that could carry a layout " \
        "bug ran before it"
    report = t.report()
    report.stopped = "Ctrl-C"
    assert report.verdict.mark == "?" and "\n? stopped by Ctrl-C after 5 recorded ops" in _printed(report)


class _T5Bias(torch.nn.Module):
    """huggingface/transformers ``T5Attention.compute_bias``: relative positions ``key - query`` put in
    buckets, looked up in an ``Embedding(buckets, H)`` and laid out ``permute([2, 0, 1])``; the bug
    ``permute([2, 1, 0])`` trades queries and keys (the bias of i→j lands on j→i). Written here."""

    def __init__(self, D: int, H: int, order: list[int]):
        super().__init__()
        self.H, self.order = H, order
        self.qk = torch.nn.Linear(D, 2 * D, bias=False)
        self.bias = torch.nn.Embedding(16, H)

    def forward(self, x):
        B, T, D = x.shape
        q, k = self.qk(x).split(D, dim=-1)                                          # (B, T, D) each
        q = q.view(B, T, self.H, D // self.H).transpose(1, 2)                       # (B, H, T, d_k)
        k = k.view(B, T, self.H, D // self.H).transpose(1, 2)                       # (B, H, T, d_k)
        relative = torch.arange(T)[None, :] - torch.arange(T)[:, None]             # (T, T) key - query
        buckets = relative.clamp(-7, 7) + 8                                         # (T, T)
        bias = self.bias(buckets).permute(self.order).unsqueeze(0)                  # (1, H, T, T)
        return (q @ k.transpose(-2, -1) + bias).softmax(dim=-1)                     # (B, H, T, T)


@pytest.mark.parametrize("order,mark", [([2, 0, 1], "✓"), ([2, 1, 0], "?")])
def test_an_op_that_swaps_two_axes_of_one_name_is_not_checked_by_names(order, mark):
    """The bias's two token axes are both ``T``: names cannot tell the buggy ``permute([2, 1, 0])``
    (queries and keys traded) from the right one, so that op is not proven and the verdict is ``?``,
    never ``✓`` (it was ``✓`` once the bias's heads axis got its name); the right one keeps its ``✓``."""
    torch.manual_seed(0)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _T5Bias(24, 3, order)(torch.randn(2, 5, 24))
    v = t.report().verdict
    assert v.mark == mark
    permute = next(e.index for e in t.events if e.op == "permute")
    swapped = f"#{permute} permute moves two axes both named T past each other, and names cannot tell which is which"
    assert (swapped in v.unproven) == (mark == "?")
    if mark == "?":
        assert v.line.startswith(f"? checked {v.total} of {v.total} ops that could carry a layout bug; not proven: "
                                 f"{swapped}; no errors or warnings in what was checked")


class _ChannelsFirst(torch.nn.Module):
    """timm's ``Attention2d`` (tests/corpus/reports7/timm_attention2d_scale.py): heads ``(B, H, d, N)``, the
    weights ``[B, H, N, N]`` transposed for ``v @ attn.transpose(-2, -1)`` (``how``: the weights as given to
    that product; ``"transposed-softmax"`` transposes the scores before the softmax instead)."""

    def __init__(self, D: int, H: int, how: str):
        super().__init__()
        self.H, self.how = H, how
        self.qkv = torch.nn.Conv2d(D, 3 * D, 1)

    def forward(self, x):
        B, C, Hp, Wp = x.shape
        q, k, v = self.qkv(x).view(B, self.H, 3 * C // self.H, -1).chunk(3, dim=2)   # (B, H, d, N)
        scores = (q.transpose(-2, -1) @ k) * (C // self.H) ** -0.5                    # (B, H, N, N)
        if self.how == "transposed-softmax":
            return v @ scores.transpose(-2, -1).softmax(dim=-1)
        attn = scores.softmax(dim=-1)
        return v @ (attn.transpose(-2, -1) if self.how == "right" else attn)


@pytest.mark.parametrize("how,mark,kinds", [("right", "✓", []), ("untransposed", "✗", ["values-by-queries"]),
                                            ("transposed-softmax", "✗", ["softmax-wrong-axis"])])
def test_two_axes_of_one_name_told_apart_by_their_query_and_key_roles_are_checked(how, mark, kinds):
    """The weights' two axes are both ``N``, but the scores' product gave them the roles query and key, carried
    through the transpose: the move is checked (by the roles the weighted-values and softmax rules read), so
    timm's right file is ✓ (``?`` on a8dba97: "#6 transpose moves two axes both named N past each other"),
    and the slips those roles catch stay ✗."""
    torch.manual_seed(0)
    with shapetrace.trace(dims="B=2 Hp=2 Wp=3 D=32 H=4") as t:
        _ChannelsFirst(32, 4, how)(torch.randn(2, 32, 2, 3))
    v = t.report().verdict
    assert (v.mark, [d.kind for d in t.diagnostics if d.severity == "error"]) == (mark, kinds)
    assert not any("past each other" in u for u in v.unproven)


def _scores_plus_bias(x, H, bias):
    B, T, D = x.shape                                               # (B, T, D)
    q = x.view(B, T, H, D // H).transpose(1, 2)                     # (B, H, T, d_k)
    return (q @ q.transpose(-2, -1) + bias).softmax(dim=-1)         # (B, H, T, T)


def test_an_operand_broadcast_with_unnamed_axes_leaves_its_op_unchecked():
    """A relative-position bias gathered from a table by a literal index, as Swin's
    ``table[index.view(-1)].view(N, N, -1).permute(2, 0, 1)`` (microsoft/Swin-Transformer), added to the
    scores: the sum's own axes are named (from the scores), but the bias's two token axes have none, so
    nothing checked that they line up with the queries and the keys. 99fc103 counted the add checked and
    said ``✓`` (the gather and the view already unchecked here say ``?`` anyway; the add is the op that
    lines the bias up)."""
    T, H = 5, 3
    index = (torch.arange(T)[:, None] - torch.arange(T)[None, :] + T - 1).view(-1)   # (T·T,)
    table = torch.randn(2 * T - 1, H)                                               # (2T-1, H)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        bias = table[index].view(T, T, -1).permute(2, 0, 1)                         # (H, T, T)
        _scores_plus_bias(torch.randn(2, T, 24), H, bias)
    add = next(e for e in t.events if e.op == "add")
    assert (add.inputs[1].shape, add.inputs[1].dims, add.outputs[0].dims) == (
        (3, 5, 5), ("H", None, None), ("B", "H", "T", "T"))
    assert add.index in unchecked_ops(t.events)
    assert t.report().verdict.mark == "?"


def test_ops_on_a_weight_alone_do_not_count_and_a_class_token_grown_to_the_batch_does():
    """torch's cross-attention (``nn.MultiheadAttention(q, kv, kv)``, as in nn.Transformer's decoder and DETR)
    splits its packed ``in_proj_weight`` into the queries' rows and the keys' and values': an op on a
    parameter alone, unnamed, which left every such file ``?`` on 1bb0300 (tests/corpus/public12/
    torch_transformer.py). On random weights any arrangement of a weight is another weight; where it meets
    the data is checked there. A class token expanded over the batch still counts: test_vision_files."""
    from torch import nn

    from shapetrace.engine.verdict import could_carry_a_layout_bug

    mha = nn.MultiheadAttention(24, 3, batch_first=True)
    q, kv = torch.randn(2, 5, 24), torch.randn(2, 7, 24)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 S=7 D=24 H=3") as t:
        mha(q, kv, kv, need_weights=False)
    weight_ops = [e for e in t.events if e.from_parameters]
    assert [e.op for e in weight_ops] == ["split", "split"]   # (the weight, then the bias)
    assert not any(could_carry_a_layout_bug(e) for e in weight_ops)
    assert t.report().verdict.mark == "✓"


class _BlockWithMLP(torch.nn.Module):
    """A pre-norm transformer block as GPT-2, timm's ViT and every library write it: fused q/k/v, heads, and an
    MLP to 4·D and back, then a classifier of 10 outputs."""

    def __init__(self, D: int, H: int):
        super().__init__()
        self.H = H
        self.qkv, self.proj = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.fc1, self.fc2, self.head = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D), torch.nn.Linear(D, 10)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.H, D // self.H).permute(2, 0, 3, 1, 4)   # (3, B, H, T, d_k)
        w = (q @ k.transpose(-1, -2) / (D // self.H) ** 0.5).softmax(dim=-1)              # (B, H, T, T)
        x = x + self.proj((w @ v).transpose(1, 2).reshape(B, T, D))                       # (B, T, D)
        x = x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))                           # (B, T, D)
        return self.head(x[:, 0])                                                         # (B, 10)


def test_an_mlp_to_four_times_the_width_and_a_classifier_are_checked():
    """fc1's 4·D and the head's 10 outputs are widths a module's projection made that no name has: ``F``.
    On 8110233 both were unnamed: ``? checked 12 of 15 ops ...; not checked (unnamed axes): #11 linear, #12
    linear, #14 linear`` on correct code (GPT-2, GPT-Neo, GPT-J, Bloom, Falcon, timm's and torchvision's ViT
    on first sight)."""
    torch.manual_seed(0)
    model, x = _BlockWithMLP(32, 4).eval(), torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4", dependencies=True) as t:
        model(x)
    assert [(e.module, e.outputs[0].dims) for e in t.events if e.op == "linear"] == [
        ("qkv", ("B", "T", "3*D")), ("proj", ("B", "T", "D")), ("fc1", ("B", "T", "F")), ("fc2", ("B", "T", "D")),
        ("head", ("B", "F"))]
    assert t.report().verdict.mark == "✓", t.report().verdict.line


def test_a_view_that_reads_its_operand_as_it_lies_is_not_counted():
    """A buffer expanded to its own size, a prefill's whole slice ``bias[:, :, :T, :T]`` of a ``[.., T, T]``
    table: the same shape, strides, offset and names as the operand, so no element moves and none is
    renamed (BERT's ``token_type_ids.expand(position_ids.shape[0], -1)`` of ``[1, 32]``, unnamed, left BERT
    '?' on 8110233; each was counted there). A slice that picks and a transpose are counted."""
    table = torch.arange(32).expand(1, -1)                                           # (1, 32)
    x = torch.randn(4, 4, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=4 T=4 D=8 H=2") as t:
        shapetrace.name(x, "B T D")
        table.expand(1, -1)                                                          # (1, 32) as it lies
        x.view(4, 4, 8)                                                              # (B, T, D) as it lies
    assert [e.op for e in t.events] == ["expand", "view"]
    assert (t.report().verdict.total, t.report().verdict.unchecked) == (0, ())
    with torch.no_grad(), shapetrace.trace(dims="B=4 T=4 D=8 H=2") as t:
        shapetrace.name(x, "B T D")
        x[:, :4]                                                                     # (B, T, D) as it lies
        x[:, :3]                                                                     # (B, T[0:3], D): picks
        x.transpose(0, 1)                                                            # (T, B, D): moves
    assert [(e.op, e.outputs[0].dims) for e in t.events] == [
        ("__getitem__", ("B", "T", "D")), ("__getitem__", ("B", "T[0:3]", "D")), ("transpose", ("T", "B", "D"))]
    assert t.report().verdict.total == 2


class _Embeddings(torch.nn.Module):
    """Token, token-type and position embeddings in the style of transformers' RobertaEmbeddings
    (models/roberta/modeling_roberta.py): the token types come from a buffer of zeros grown over the batch
    (``self.token_type_ids.expand(B, -1)``) and picked at the positions. ``types``: that buffer's values
    (zeros, as RoBERTa's, or each position's own type id)."""

    def __init__(self, types="zeros", P=40, D=32, vocab=50):
        super().__init__()
        self.words, self.kinds, self.places = (torch.nn.Embedding(vocab, D), torch.nn.Embedding(P, D),
                                               torch.nn.Embedding(P, D))
        buffer = torch.zeros(1, P, dtype=torch.long) if types == "zeros" else torch.arange(P).view(1, P) % 2
        self.register_buffer("token_type_ids", buffer, persistent=False)                      # (1, P)

    def forward(self, ids):
        B, T = ids.shape                                                                    # (B, T)
        positions = torch.arange(T).expand(B, T)                                            # (B, T)
        types = torch.gather(self.token_type_ids.expand(B, -1), 1, positions)              # (B, T)
        return self.words(ids) + self.kinds(types) + self.places(positions)                # (B, T, D)


@pytest.mark.parametrize(("types", "mark", "unchecked"), [("zeros", "✓", ()), ("alternating", "?", ("expand",))])
def test_an_expand_of_a_buffer_of_one_value_cannot_misplace_an_element(types, mark, unchecked):
    """A tensor whose elements are all one value is the same tensor in any arrangement: growing RoBERTa's
    zeros over the batch can put nothing where it does not belong, so its unnamed axis (the 40 positions
    of the table) leaves nothing unchecked. The same expand of a buffer of distinct values is still an op
    whose layout matters. On 9890a4f the zeros were ``? checked 5 of 6 ops; not checked: #1 expand``."""
    ids = torch.randint(0, 50, (2, 6))
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        _Embeddings(types)(ids)
    verdict = t.report().verdict
    assert verdict.mark == mark and tuple(op for _, op in verdict.unchecked) == unchecked


def test_a_cut_keeping_learned_tokens_with_the_inputs_is_not_proven():
    """``x_norm[:, 1:]`` of DINOv2's ``1+4+T`` tokens (class, 4 registers, patches) keeps the registers with
    the patches: the pre-register slice kept by a slip, or all non-class tokens on purpose; names cannot
    tell, so the verdict is ``?``. On fc24ddf the join was unnamed (``?`` for want of names); with it named
    and no such check the bug would be ``✓``. The correct cuts (``[:, 0]``, ``[:, 1:5]``, ``[:, 5:]``) pass."""
    from tests.corpus.helpers import traced_build, verdict_line
    from tests.corpus.public13 import dinov2_registers

    t = traced_build(dinov2_registers, "registers-as-patches", "B=2 T=6 D=64 H=4")
    assert verdict_line(t).startswith(
        "? checked 24 of 24 ops that could carry a layout bug; not proven: #23 __getitem__ keeps (5+T)[1:11], "
        "counted entries of the model's own next to the input's tokens, and names cannot tell whether the cut "
        "meant both; no errors or warnings in what was checked")


@pytest.mark.parametrize(("pool", "mark", "why"), [
    # Funnel's pooling slip (tests/corpus/public14/funnel_pool.py): tokens j and j + T/2 averaged
    (lambda x: x.view(2, 2, 3, 8).mean(1), "?",
     "; not proven: #1 mean reduces along T/3 and keeps a finer piece of T: it meets tokens set apart, and names "
     "cannot tell whether they were laid out so; no errors or warnings in what was checked"),
    # neighbours pooled (the finest piece of T): checked as before
    (lambda x: x.view(2, 3, 2, 8).mean(2), "✓", ""),
])
def test_a_reduction_over_a_coarse_piece_of_the_tokens_is_not_proven(pool, mark, why):
    """On main (90e1ad1) the first case was ``✓ checked all 2 ops``: public14/funnel_pool's ``pool-by-halves``
    bug got ``✓``. The same op is Hiera's correct query pooling over unrolled mask units, hence ``?``, not ``✗``."""
    x = torch.randn(2, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        pool(x)
    v = t.report().verdict
    assert (v.mark, v.checked, v.total) == (mark, 2, 2)
    assert v.line == (f"? checked 2 of 2 ops that could carry a layout bug{why}" if why else
                      "✓ checked all 2 ops that could carry a layout bug: every axis keeps its meaning from input "
                      "to output") + UNASKED


class _RecurrentPooling(torch.nn.Module):
    """Attention pooling over a bidirectional LSTM's states, as seq2seq tutorials and the KEQA and ESIM code
    of tests/corpus/reports5 write it: ``outputs, _ = self.lstm(x)`` throws the final states away."""

    def __init__(self, D: int, keep_states: bool):
        super().__init__()
        self.lstm = torch.nn.LSTM(D, D // 2, batch_first=True, bidirectional=True)
        self.score = torch.nn.Linear(D, 1)
        self.keep_states = keep_states

    def forward(self, x):                                               # (B, T, D)
        if self.keep_states:
            return self.lstm(x)                                         # every result handed back unread
        outputs, _ = self.lstm(x)                                       # (B, T, D)
        weights = self.score(outputs).softmax(dim=1)                    # (B, T, 1)
        return (weights * outputs).sum(dim=1)                           # (B, D)


@pytest.mark.parametrize("B,T", [(2, 6), (4, 4)])
def test_a_result_thrown_away_while_another_is_read_needs_no_names(B, T):
    """The LSTM's final states ``[2, B, D/2]`` (layers·directions first) get no names, and no later op reads
    them: the op counts as checked on the output it handed on. On af0e286 the run was ``? checked 3 of 4 ops
    …; not checked (unnamed axes): #0 lstm`` (and a KEQA bug with its softmax over one entry was ``?`` only
    for that, never found: tests/engine/test_weights.py)."""
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D=32") as t:
        _RecurrentPooling(32, keep_states=False)(shapetrace.name(torch.randn(B, T, 32), "B T D"))
    lstm = t.events[0]
    assert (lstm.op, lstm.outputs[0].dims, lstm.outputs[1].dims) == ("lstm", ("B", "T", "D"), (None, None, None))
    assert unchecked_ops(t.events) == []
    assert t.report().verdict.line.startswith("✓ checked all 4 ops that could carry a layout bug")


def test_an_op_none_of_whose_results_was_read_still_needs_names_on_each():
    """A forward that returns the LSTM's results unread: nothing tells a result handed back from one dropped,
    so the final states' missing names keep the op unchecked."""
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
        _RecurrentPooling(32, keep_states=True)(shapetrace.name(torch.randn(2, 6, 32), "B T D"))
    assert [t.events[i].op for i in unchecked_ops(t.events)] == ["lstm"]
    assert t.report().verdict.mark == "?"


class _Packed(nn.Module):
    """Self-attention written as flash-attn's and Phi-2's: ``rearrange(qkv, '... (three h d) -> ... three h d')``,
    the parts packed again by ``torch.stack([q, k, v], dim=2)`` (around a rotary call) and ``unbind(dim=2)``."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.Wqkv, self.out_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):                                                          # (B, T, D)
        qkv = rearrange(self.Wqkv(x), "... (three h d) -> ... three h d", three=3, h=self.heads)
        q, k, v = qkv[:, :, 0] * 1.0, qkv[:, :, 1] * 1.0, qkv[:, :, 2]              # (B, T, H, d)
        q, k, v = torch.stack([q, k, v], dim=2).unbind(dim=2)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / q.shape[-1] ** 0.5
        out = torch.einsum("bhts,bshd->bthd", scores.softmax(dim=-1), v)
        return self.out_proj(rearrange(out, "b t h d -> b t (h d)"))


def _packed_verdict():
    torch.manual_seed(0)
    model = _Packed().eval()
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        model(torch.randn(2, 6, 32))
    return t.report().verdict


def test_a_stack_unbound_along_the_axis_it_made_needs_no_name_for_it():
    """Fails on a8dba97 (``?``, ``not checked (unnamed axes): #16 stack, #43 stack``): Phi-2's rotary rebuilds q
    and k (tests/corpus/public18/phi2_mixformer.py), so its ``torch.stack([q, k, v], dim=2)`` axis has no name;
    it only counts q, k and v, which ``unbind(dim=2)`` gives back as they went in (verdict.unpacked_stacks). The
    same stack of parts named by provenance (``qkv``) was checked before too."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.public18 import phi2_mixformer

    verdict = traced_build(phi2_mixformer, "", "B=2 T=6 D=64 H=4").report().verdict
    assert (verdict.mark, verdict.checked, verdict.total, verdict.unchecked) == ("✓", 54, 54, ())
    assert _packed_verdict().mark == "✓"



def _rope_1d(positions, x, table):
    """A 1-D rope on ``x`` ``[T, H, d]`` whose positions are ``positions`` read flat and cut to the tokens (the
    fused kernel's ``positions_ptr + token``), gathered from ``table`` ``[P, d]`` (cos and sin halves)."""
    cos, sin = table[positions.reshape(-1)[:x.shape[0]]].chunk(2, dim=-1)
    cos, sin = torch.cat((cos, cos), dim=-1)[:, None, :], torch.cat((sin, sin), dim=-1)[:, None, :]
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@pytest.mark.parametrize("rows, mark", [(3, "?"), (1, "✓")])
def test_a_rotary_table_gathered_at_a_cut_of_a_merged_grid_is_not_checked_on_its_values(rows, mark):
    """sglang issue #35345: M-RoPE ids ``[3, T]`` read by a 1-D kernel as ``positions.reshape(-1)[:T]`` (only
    the first row reaches the table). The table's values show the angles each token turns by, never which
    pieces of the merge the cut kept (the first T of ``[T, 3]`` flattened vary along the tokens as well), so
    that cut is not checked on the values and the verdict is ``?`` naming it. Ids ``[1, T]`` (no merge: a
    reshape of one row) stay checked. Fails on eefe532 (``✓ checked all`` for ``[3, T]``)."""
    inv = 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8)
    freqs = torch.outer(torch.arange(64).float(), inv)
    table = torch.cat((freqs.cos(), freqs.sin()), dim=-1)                       # (P, 8)
    positions = torch.arange(6).repeat(rows, 1)                                 # (rows, T)
    x = torch.randn(6, 32)
    with torch.no_grad(), shapetrace.trace(dims="T=6 D=32 H=4") as t:
        q = _rope_1d(positions, x.view(6, 4, 8), table).transpose(0, 1)            # (H, T, d_k)
        (q @ q.transpose(1, 2)).softmax(dim=-1)
    line = t.report().verdict.line
    assert line[0] == mark, line
    cut = [e.index for e in t.events if e.op == "__getitem__" and e.inputs[0].shape == (6 * rows,)]
    assert (f"#{cut[0]} __getitem__" in line) == (rows == 3), line


def _causal_conv(start: int, padding: int = 3):
    """Mamba's depthwise causal ``conv1d`` over the tokens (kernel 4, ``padding``), its positions cut back to the
    tokens' count from ``start`` (``[..., :T]`` at 0), added to the input."""
    torch.manual_seed(0)
    conv = nn.Conv1d(64, 64, 4, groups=64, padding=padding)
    x = torch.randn(2, 6, 64)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        shapetrace.name(x, "B T D")
        x + conv(x.transpose(1, 2))[..., start:start + 6].transpose(1, 2)
    return t


def test_a_padded_convs_positions_cut_back_to_the_tokens_are_checked_by_their_window():
    """Which tokens the kept positions of a padded conv read is the cut's start, the padding and the kernel:
    ``[..., :T]`` of ``padding = 3`` reads tokens j - 3 to j (causal: ✓); ``[..., 3:]`` reads j to j + 3 (Jamba's
    ``conv-future-taps``, Bamba's ``conv-trim-keeps-future``) and ``padding = 4`` with ``[..., :T]`` j - 4 to j - 1
    (a lag): both are named alike (``N[3:9]``, ``N[0:6]``), so ``?`` with why. On eefe532 the slip was ``?`` only
    while the gate's features went unnamed: with them named (tests/engine/test_axis_compute.py) it was ✓."""
    assert _causal_conv(0).report().verdict.line.startswith("✓ checked all 4 ops")
    for start, padding, cut in ((3, 3, "N[3:9]"), (0, 4, "N[0:6]")):
        line = _causal_conv(start, padding).report().verdict.line
        assert line.startswith("? checked 4 of 4 ops that could carry a layout bug; not proven: #2 __getitem__ "
                               f"cuts N, the positions #1 conv1d made from T, back to {cut}, and names cannot "
                               "tell which tokens they stand for"), line


def _additive_pool(x, linear, query):
    """NRMS's additive attention pooling (tests/corpus/public48/nrms_user_encoder.py): a module's projection to a
    query width, a product with a query vector, a softmax over the tokens, the tokens weighed."""
    weights = torch.softmax(torch.tanh(linear(x)) @ query, dim=1)          # (B, T)
    return (weights.unsqueeze(-1) * x).sum(1)                               # (B, D)


def test_a_modules_projection_to_a_width_of_a_declared_size_is_checked():
    """``nn.Linear(D, 16)`` at D = 32, H = 4 makes a width of 16 = 2·d_k: which name it has, sizes cannot say, so
    it stays unnamed; but its elements are the weight's rows whatever their name, and any order of them is another
    weight: the linear is checked on the axes it reads and keeps. On f946d52 it was ``? ... not checked (unnamed
    axes): #0 linear`` (NRMS's additive attention, VideoMAE's and two classifiers' heads the same). A computed
    weight's rows are data (``F.linear(x, y)`` makes ``y``'s rows): still unchecked; so is a projection of unnamed
    features."""
    torch.manual_seed(0)
    x, linear, query = torch.randn(2, 5, 32), nn.Linear(32, 16), torch.randn(16)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=32 H=4") as t:
        _additive_pool(x, linear, query)
    assert t.events[0].outputs[0].dims == ("B", "T", None)
    assert t.report().verdict.line.startswith("✓ checked all")
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=32 H=4") as t:
        nn.functional.linear(x, x[0, :4] * 2)                               # (B, T, 4): rows of data
    assert t.report().verdict.mark == "?"
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=32 H=4") as t:
        nn.Linear(6, 16)(torch.randn(2, 5, 6).transpose(0, 1))              # (its input fits no seed)
    assert t.report().verdict.mark == "?"


def test_pads_looked_up_with_no_mask_anywhere_are_not_proven():
    """Ids holding a table's declared padding index, in a run where nothing hides a key (no mask fill, no mask
    to a fused attention): whether the real tokens read the pads is a contract on the values (DaoyuanLi2816/
    Molecule-Generator PR #22: an encoder called without its ``src_key_padding_mask``); ``?`` with the reason, so
    reports33's ``pads-unmasked`` stays ``?`` when its latent head counts as checked. With the mask applied, or no
    pad among the ids, nothing is said."""
    torch.manual_seed(0)
    table = nn.Embedding(9, 24, padding_idx=0)
    ids = torch.tensor([[3, 4, 5, 6, 7], [3, 4, 5, 0, 0]])
    lines = {}
    for case, given in (("unmasked", ids), ("masked", ids), ("no pads", ids.clamp(min=1))):
        with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
            x = table(given)                                                 # (B, T, D)
            mask = (given != 0)[:, None, None, :] if case == "masked" else None
            _attention(x, 3, mask)
        lines[case] = t.report().verdict.line
    assert "pad tokens entered" in lines["unmasked"] and lines["unmasked"].startswith("?")
    assert "pad tokens entered" not in lines["masked"] and "pad tokens entered" not in lines["no pads"]


def test_one_reason_said_of_several_ops_of_one_kind_is_said_once():
    """time-series-foundation-models/lag-llama's cache window ``torch.cat([cache, k], dim=1)[:, 1:]`` is cut four
    times (tests/corpus/reports40/lagllama_kv_cache): the line said "not proven: #76 __getitem__ keeps …" four
    times, each the same but for the op's number."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.reports40 import lagllama_kv_cache

    line = traced_build(lagllama_kv_cache, "", "B=2 T=5 D=32 H=4").report().verdict.line
    assert "; not proven: each of #76, #78, #129, #131 __getitem__ keeps (T+1)[1:6], counted entries of the " \
           "model's own next to the input's tokens, and names cannot tell whether the cut meant both; " in line
    assert line.count("not proven") == 1
