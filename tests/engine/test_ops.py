"""The op registry (shapetrace/engine/ops.py): an op is identified by its function, not by its name,
and one OpSpec per op holds every fact of it (no table keyed by an op's name beside the registry).

``torch.nn.functional.unfold`` (im2col: every sliding block copied into a column) and ``Tensor.unfold``
(windows along one axis: a view of the same storage) share the ``__name__`` "unfold". Style of the
im2col patch embeddings of public vision code (timm's ``PatchEmbed`` alternatives, the "unfold then
linear" patch stems in lucidrains/vit-pytorch's simple variants) and of the sliding-window code that
uses ``Tensor.unfold`` (Longformer-style chunking in transformers).
"""

from __future__ import annotations

import importlib
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from shapetrace.engine import blocks
from shapetrace.engine.op_table import ENTRIES
from shapetrace.engine.ops import BY_CALLABLE, REGISTRY, callable_index, callables_of, spec_for, spec_of_callable
from shapetrace.engine.sentences import annotate


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _patches_then_windows(x: torch.Tensor):
    B, C, Hh, W = x.shape                                                  # (B, C, H, W)
    cols = F.unfold(x, kernel_size=2, stride=2)                           # (B, C·2·2, H/2·W/2)
    rows = x.unfold(3, 2, 2)                                              # (B, C, H, W/2, 2)
    return cols, rows


def test_f_unfold_is_a_copy_with_its_own_sentence_and_tensor_unfold_a_view():
    x = torch.randn(2, 3, 4, 4)
    with shapetrace.trace() as t:
        cols, rows = _patches_then_windows(x)
    assert not _shares_storage(cols, x) and _shares_storage(rows, x)   # what torch says
    im2col, windows = t.events
    assert (im2col.op, im2col.view, im2col.copy_bytes) == ("F.unfold", False, cols.numel() * 4)
    assert (windows.op, windows.view, windows.copy_bytes) == ("unfold", True, 0)
    assert (im2col.output.shape, im2col.output.stride) == (tuple(cols.shape), cols.stride())
    assert (windows.output.shape, windows.output.stride) == (tuple(rows.shape), rows.stride())
    assert annotate(im2col).startswith("copies each sliding block of the input into one column (im2col)")
    assert annotate(windows).startswith("windows along an axis (overlapping ones share memory)")
    # no name rule of windows is applied to im2col: its own (engine/blocks.py; None, no rule at all, until 1c7ffc9)
    assert spec_for("F.unfold").names is blocks.im2col and spec_for("F.unfold").names is not spec_for("unfold").names
    assert spec_for("unfold").memory == "view"


def test_f_unfold_and_tensor_unfold_are_two_specs_found_by_their_functions():
    """The registry is looked up by the function the capture sees: the two ``unfold``s share a
    ``__name__`` and get different specs, whose memory verdicts torch's storage confirms."""
    x = torch.randn(1, 2, 4, 4)                                           # (B, C, H, W)
    im2col, windows = spec_of_callable(F.unfold), spec_of_callable(torch.Tensor.unfold)
    assert F.unfold.__name__ == torch.Tensor.unfold.__name__ == "unfold"
    assert im2col is not windows
    assert (im2col.name, im2col.memory, windows.name, windows.memory) == ("F.unfold", "copy", "unfold", "view")
    cols, rows = F.unfold(x, kernel_size=2), x.unfold(3, 2, 1)            # (B, C·2·2, 3·3), (B, C, H, 3, 2)
    assert not _shares_storage(cols, x) and _shares_storage(rows, x)
    with shapetrace.trace() as t:
        F.unfold(x, kernel_size=2)
        x.unfold(3, 2, 1)
    assert [(e.spec, e.view, e.copy_bytes > 0) for e in t.events] == [(im2col, False, True), (windows, True, False)]


def test_one_op_under_several_functions_is_one_spec():
    """``torch.split`` (torch/functional.py) and ``Tensor.split`` (torch/_tensor.py) are two functions
    of one op; ``torch.cat``/``torch.concat``, ``x @ y``/``torch.matmul``, ``F.softmax``/``x.softmax``
    likewise. ``a.__rmatmul__(b)`` is the product with its operands the other way round: its own spec."""
    assert torch.split is not torch.Tensor.split
    assert spec_of_callable(torch.split) is spec_of_callable(torch.Tensor.split) is REGISTRY["split"]
    assert spec_of_callable(torch.cat) is spec_of_callable(torch.concat) is REGISTRY["cat"]
    assert spec_of_callable(torch.matmul) is spec_of_callable(torch.Tensor.__matmul__) is REGISTRY["matmul"]
    assert spec_of_callable(F.softmax) is spec_of_callable(torch.Tensor.softmax) is REGISTRY["softmax"]
    reversed_product = spec_of_callable(torch.Tensor.__rmatmul__)
    assert reversed_product is not REGISTRY["matmul"] and reversed_product.reversed
    assert spec_of_callable(torch.Tensor.mT.__get__) is REGISTRY["mT"]   # a property read: its getter
    assert spec_of_callable(torch.Tensor.size).cheap and spec_of_callable(print) is None


def test_every_function_of_the_registry_resolves_to_one_spec():
    """Each spec's functions exist, and no function is claimed by two specs (the first would win
    silently). A spec that names its one function (``callable``) is found there and nowhere else."""
    claimed: dict = {}
    for spec in ENTRIES:
        functions = callables_of(spec)
        assert spec.cheap or spec.getter or functions, f"{spec.name}: no function of torch has this name"
        for f in functions:
            assert callable(f), spec.name
            assert claimed.setdefault(f, spec) is spec, f"{f} is both {claimed[f].name} and {spec.name}"
    for spec in BY_CALLABLE:
        assert callables_of(spec) == [callable_index_of(spec)]


def callable_index_of(spec):
    return next(f for f, s in callable_index().items() if s is spec)


#: the registry's modules: one table (``ENTRIES``) and one name index (``REGISTRY``), nothing beside
REGISTRY_MODULES = ("shapetrace.engine.ops", "shapetrace.engine.op_table", "shapetrace.engine.opspec")
ALLOWED = {"REGISTRY", "__all__"}


def _strings_in(value) -> set[str]:
    """The strings a collection holds: its keys and values, one level of nesting down."""
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, (set, frozenset, tuple, list)):
        items = list(value)
    else:
        return set()
    found = {v for v in items if isinstance(v, str)}
    for v in items:
        if isinstance(v, (set, frozenset, tuple, list)) and not isinstance(v, str):
            found |= {w for w in v if isinstance(w, str)}
    return found


def side_tables(module) -> dict[str, list[str]]:
    """Module-level dicts, sets, tuples and lists of ``module`` that hold or are keyed by op names."""
    names = {n for spec in ENTRIES for n in (spec.name, *spec.aliases)}
    found = {}
    for name, value in vars(module).items():
        ops = sorted(_strings_in(value) & names)
        if ops and name not in ALLOWED and not name.startswith("__"):
            found[name] = ops
    return found


@pytest.mark.parametrize("module", REGISTRY_MODULES)
def test_no_table_keyed_by_op_names_beside_the_registry(module):
    """Every fact of an op is a field of its OpSpec: no ELEMENTWISE tuple, no family or replay table,
    no CHEAP/ADDITIVE/SCALING sets keyed by name beside the registry (issue 33, item 6)."""
    found = side_tables(importlib.import_module(module))
    assert not found, f"tables of op names beside the registry in {module}: {found}"


def test_the_side_table_check_finds_a_table_of_op_names():
    module = types.ModuleType("planted")
    module.ADDITIVE = frozenset({"add", "__add__"})
    module._FAMILIES = {"x": ("view", "reshape")}
    module.WORDS = ("a", "b")
    assert side_tables(module) == {"ADDITIVE": ["__add__", "add"], "_FAMILIES": ["reshape", "view"]}


def test_a_recorded_event_carries_the_spec_of_the_function_it_called():
    """``torch.split(qkv, D, dim=-1)`` (the transformers GPT-2 style) and ``qkv.split(D, dim=2)`` (nanoGPT's
    ``self.c_attn(x).split(self.n_embd, dim=2)``) are two functions of one op: both events hold its spec."""
    qkv = torch.randn(2, 6, 3 * 8)                                         # (B, T, 3·D)
    with shapetrace.trace() as t:
        torch.split(qkv, 8, dim=-1)                                        # 3 × (B, T, D)
        qkv.split(8, dim=2)                                                # 3 × (B, T, D)
    assert [e.spec for e in t.events] == [REGISTRY["split"], REGISTRY["split"]]
    assert [e.op for e in t.events] == ["split", "split"]
    assert [[o.shape for o in e.outputs] for e in t.events] == [[(2, 6, 8)] * 3] * 2


def test_torch_embedding_is_not_f_embedding():
    """``F.embedding(ids, weight)`` calls ``torch.embedding(weight, ids)``: the same ``__name__`` with the
    operands the other way round (torch/nn/functional.py). Known by name, a direct ``torch.embedding``
    call got a row whose token ids were the weight matrix; known by its function, it is an op the
    registry does not know (no row, no names), and ``F.embedding`` keeps its row."""
    ids = torch.randint(0, 10, (2, 6))                                     # (B, T)
    weight = torch.randn(10, 16)                                           # (V, D)
    with shapetrace.trace(dims={"B": 2, "T": 6, "D": 16}) as t:
        F.embedding(ids, weight)                                           # (B, T, D)
        torch.embedding(weight, ids)                                       # (B, T, D)
    assert [(e.op, [i.shape for i in e.inputs], e.output.dims) for e in t.events] == [
        ("embedding", [(2, 6)], ("B", "T", "D"))]
    assert spec_of_callable(torch.embedding) is None


def test_a_number_divided_by_a_tensor_passes_names_on():
    """``1.0 / t`` calls ``Tensor.__rtruediv__``, which is the function ``Tensor.__rdiv__`` (its ``__name__``):
    known by name, it was an op the registry did not know, and the names stopped there. Known by its
    function, it is the elementwise op it is. Style of Llama's rotary table in transformers,
    ``inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))``."""
    assert torch.Tensor.__rtruediv__.__name__ == "__rdiv__"
    x = torch.rand(2, 6, 16) + 1                                           # (B, T, D)
    with shapetrace.trace(dims={"B": 2, "T": 6, "D": 16}) as t:
        inv = 1.0 / x                                                      # (B, T, D)
        inv.transpose(1, 2)                                                # (B, D, T)
    assert [(e.op, e.output.dims) for e in t.events] == [("transpose", ("B", "D", "T"))]
    assert spec_of_callable(torch.Tensor.__rtruediv__) is REGISTRY["__rtruediv__"]


def test_an_unnamed_axis_repeated_by_expand_is_said_as_an_axis_with_its_size():
    """GQA's key heads repeated by ``expand`` (transformers' ``repeat_kv``: ``hidden[:, :, None].expand(
    B, H_kv, n_rep, T, d_k)``), traced without names as the quiz does: the sentence said ``stride 0 on
    2``, a size that reads as an axis index (issue 35: "stride 0 on 2"); an axis 0 of size 3 likewise."""
    x = torch.randn(1, 4, 5, 16)                                          # (B, H_kv, T, d_k)
    with shapetrace.trace() as t:
        x[:, :, None].expand(1, 4, 2, 5, 16)                              # (B, H_kv, n_rep, T, d_k)
    expand = t.events[-1]
    assert annotate(expand) == "repeats without copying: stride 0 on axis 2 (size 2); a view"
    with shapetrace.trace() as named:
        cls = shapetrace.name(torch.randn(1, 1, 8), "_ _ D")              # timm's cls_token (1, 1, D)
        cls.expand(3, -1, -1)                                            # (B, 1, D)
    assert annotate(named.events[-1]).startswith("repeats without copying: stride 0 on axis 0 (size 3)")


@pytest.mark.parametrize("like", [torch.ones_like, torch.zeros_like, lambda m: torch.full_like(m, 2.0)])
def test_a_tensor_of_anothers_shape_carries_its_axes(like):
    """Mistral's sliding window (huggingface/transformers PR #26792, tests/corpus/reports3/mistral_window.py):
    ``1 - triu(ones_like(mask, dtype=int), diagonal=1 - W)`` over the causal mask's ``[T, T]``. On 96f365c
    ``ones_like`` had no entry, its result no names, and the correct file was ``? checked 20 of 21 ops ...
    not checked (unnamed axes): #2 triu``."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        scores = x @ x.transpose(1, 2)                                     # (B, T, T)
        like(scores).triu(1)                                               # (B, T, T)
    assert [e.outputs[0].dims for e in t.events if e.op == "triu"] == [("B", "T", "T")]


@pytest.mark.parametrize("op", [torch.floor, torch.ceil, torch.round, torch.trunc, torch.log1p, torch.expm1,
                                lambda t: t.clamp_min(1.0), F.relu6, F.leaky_relu])
def test_one_operand_elementwise_ops_keep_their_operands_axes(op):
    """Llama 4's attention temperature, ``log(floor((positions + 1) / floor_scale) + 1) * attn_scale + 1`` over
    ``arange(T)``, viewed ``(1, T, 1, 1)``: on fc24ddf ``floor`` and its kind were known on the meta device only,
    so the positions lost ``T`` and the view was ``not checked (unnamed axes)`` (tests/corpus/public13/
    llama4_chunked.py)."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        positions = torch.arange(x.shape[1]).float()
        op(positions + 1.0).view(1, -1, 1, 1)
    view = t.events[-1]
    assert view.op == "view" and tuple(view.outputs[0].dims) == (None, "T", None, None)


@pytest.mark.parametrize("norm", ["batch", "instance"])
def test_a_per_channel_norm_keeps_its_inputs_axes(norm):
    """xmu-xiaoma666/External-Attention-pytorch's SKAttention: ``Conv2d -> BatchNorm2d -> ReLU`` branches
    stacked on a new axis. Fails on 90e1ad1: ``batch_norm``/``instance_norm`` were not in the registry, so
    their output was a fresh unnamed tensor and the stack of the branches ``(None, None, None, None, None)``."""
    layer = (nn.BatchNorm2d(32) if norm == "batch" else nn.InstanceNorm2d(32)).eval()
    x = torch.randn(2, 32, 6, 6)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B D Hp Wp")
        y = layer(x)
        torch.stack([y, y], 0)
    assert [(e.op, e.outputs[0].dims) for e in t.events] == [("stack", (None, "B", "D", "Hp", "Wp"))]


def test_f_unfold_names_its_blocks_by_replaying_the_call():
    """``F.unfold`` moves elements, so its spec replays it (``replay``) and element provenance names each output
    axis (no name rule of its own): apple/ml-cvnets MobileViTv2's ``unfolding_pytorch`` of a ``[B, D, Hp, Wp]``
    map into 2 x 2 patches gives the channels outer with a 2 x 2 pixel piece, and the patches' grid. On a8dba97
    every axis was unnamed (``[None, None, None]``; tests/corpus/public18/mobilevitv2_separable.py checked 0 of 12 ops,
    and at B = 4, Hp = Wp = 4 warned ``tokens-merged-with-features`` on its correct file)."""
    x = torch.randn(2, 16, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=16 Hp=6 Wp=8") as t:
        shapetrace.name(x, "B D Hp Wp")
        F.unfold(x, kernel_size=(2, 2), stride=(2, 2))
    assert [(e.op, e.outputs[0].dims) for e in t.events] == [("F.unfold", ("B", "D*Hp%2*Wp%2", "Hp/2*Wp/2"))]
