"""The tracer over torch's own corpus of op samples (OpInfo ``op_db``), float32 on the CPU.

For every op and sample, run inside ``shapetrace.trace(dims=...)`` (dims whose sizes coincide with
the corpus' own sizes, 2, 3, 5, 10 and 20, to tempt false names):

- the tracer raises nothing the plain op does not raise (and the same exception type when it does),
  and its diagnostics and JSON can always be computed;
- every recorded event's outputs have the shape, stride, storage offset and contiguity that torch
  returned for that call (a mode entered inside the trace keeps the real tensors), and the op's
  result equals in layout what the same call returns outside the trace;
- an event marked ``view`` shares storage with an input;
- no axis name contradicts a declared size.

The attention ops (``CORE``) always run, one test per op name (all its variants); the rest of the corpus is
marked ``op_corpus`` (``pytest -m op_corpus`` selects it, ``-m "not op_corpus"`` skips it), in ``SHARDS`` tests
that each take every ``SHARDS``-th op and name each op that fails. Nothing here needs ``op_db`` to collect: importing
it (and the torch._dynamo it pulls in) took 3.6 s of every worker's collection, and only the worker that runs
these tests pays it now (tests/scheduling.py starts them together).
"""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
from torch.overrides import _get_current_function_mode_stack

import shapetrace
from tests.styles import Capture, contradictions, event_problems, layout, tensors_in

pytestmark = pytest.mark.filterwarnings("ignore")  # the corpus exercises deprecated and beta ops on purpose

MAX_SAMPLES = 5
DIMS = [
    {"B": 5, "T": 5, "D": 10, "H": 2},      # (S, S, M): d_k = 5 == B == T
    {"B": 5, "T": 10, "D": 5, "H": 5},      # (S, M, S): d_k = 1
    {"B": 5, "T": 5, "D": 5, "H": 5},       # (S, S, S): everything equal
    {"B": 10, "T": 5, "D": 20, "H": 4},     # (M, S, L): d_k = 5 == T
    {"B": 2, "T": 3, "S": 4, "D": 6, "H": 3, "H_kv": 1},
]

#: The ops attention code is written with.
CORE = {
    "view", "reshape", "transpose", "permute", "matmul", "bmm", "baddbmm", "einsum", "nn.functional.linear",
    "softmax", "masked_fill", "cat", "stack", "split", "split_with_sizes", "tensor_split", "chunk", "unbind",
    "expand", "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten", "narrow", "select", "repeat",
    "repeat_interleave", "contiguous", "movedim", "t", "mT", "T", "__getitem__", "view_as", "reshape_as",
    "nn.functional.scaled_dot_product_attention", "nn.functional.multi_head_attention_forward", "roll", "tril",
    "triu", "where", "nn.functional.dropout", "nn.functional.embedding", "outer", "diagonal", "as_strided",
    "index_select", "gather", "nn.functional.pad", "nn.functional.layer_norm",
}
#: Ops left out: their samples are not plain strided float32 CPU tensors, or they are too slow to sample.
#: ops that change a tensor's shape in place after the call (the recorded layout is the one at the call)
SKIP: set[str] = {"resize_", "resize_as_"}

#: The non-core ops in this many tests (each a few tenths of a second).
SHARDS = 24


def op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


@functools.cache
def ops() -> tuple:
    """torch's OpInfos with float32 CPU samples, less ``SKIP`` (op_db imported on first use, not to collect)."""
    from torch.testing._internal.common_methods_invocations import op_db

    return tuple(op for op in op_db if torch.float32 in op.supported_dtypes("cpu") and op_id(op) not in SKIP)


def samples(op) -> list:
    """The op's first samples. ``op.sample_inputs`` would wrap them in a tracker that calls ``inspect.stack()``
    for every sample (seconds under pytest's deep stack); the generator it wraps gives the same inputs."""
    torch.manual_seed(0)
    return list(itertools.islice(op.sample_inputs_func(op, "cpu", torch.float32, False), MAX_SAMPLES))


def call(op, sample, seed: int):
    torch.manual_seed(seed)
    return op.op(sample.input, *sample.args, **sample.kwargs)


def check(op) -> list[str]:
    """Every sample, plain once and traced under two of the dims."""
    problems: list[str] = []
    runs = zip(samples(op), samples(op), samples(op))
    for i, (plain_sample, *traced_samples) in enumerate(runs):
        plain = plain_exc = None
        try:
            plain = call(op, plain_sample, i)
        except Exception as exc:  # the plain op may raise; the traced one must raise the same
            plain_exc = exc
        for j, traced_sample in enumerate(traced_samples):
            dims = DIMS[(i + 2 * j) % len(DIMS)]
            problems += [f"sample {i} {dims}: {p}" for p in check_traced(op, traced_sample, i, dims, plain, plain_exc)]
            if _get_current_function_mode_stack():
                return problems
    return problems


def check_traced(op, sample, seed: int, dims: dict, plain, plain_exc) -> list[str]:
    cap, result, traced_exc, t = Capture(), None, None, None
    try:
        with shapetrace.trace(dims=dims) as t:
            with cap:
                result = call(op, sample, seed)
    except Exception as exc:
        traced_exc = exc
    if _get_current_function_mode_stack():
        return ["a function mode is left on the stack"]
    if type(traced_exc) is not type(plain_exc):
        return [f"plain raised {plain_exc!r:.200}, traced raised {traced_exc!r:.200}"]
    if t is None:
        return []
    problems = []
    try:
        assert isinstance(t.diagnostics, list)
        t.to_json()
    except Exception as exc:
        problems.append(f"diagnostics or to_json raised {exc!r:.200}")
    problems += event_problems(t, cap.calls)
    problems += contradictions(t, dims)
    if plain_exc is None:
        got, want = [layout(r) for r in tensors_in(result)], [layout(r) for r in tensors_in(plain)]
        if got != want:
            problems.append(f"traced result {got}, plain result {want}")
    return problems


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The samples are tiny: a second intra-op thread only contends for the shared cores (2.5x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", sorted(CORE))
def test_attention_ops(name):
    found = [op for op in ops() if op.name == name]
    assert found, f"torch's op_db has no float32 CPU samples of {name}"
    assert {op_id(op): check(op) for op in found} == {op_id(op): [] for op in found}


@pytest.mark.op_corpus
@pytest.mark.parametrize("shard", range(SHARDS))
def test_op_corpus(shard):
    rest = [op for op in ops() if op.name not in CORE][shard::SHARDS]
    assert rest, "an empty shard: fewer ops than SHARDS"
    assert {op_id(op): problems for op in rest if (problems := check(op))} == {}
