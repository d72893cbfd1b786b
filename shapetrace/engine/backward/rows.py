"""The backward as plain data: one :class:`BackwardRow` per forward op, in the order autograd ran it.

Read once after the backward, from the hooked steps (:mod:`.graph`), the saved tensors (:mod:`.saved`)
and the forward's inference. A gradient has its tensor's shape, so it carries that tensor's axis names
as the forward inferred them (never a new guess; a size where the forward has no name). Nothing here
imports Rich.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from shapetrace.engine import axes as ax
from shapetrace.engine.opspec import Family

#: families whose outputs are attention weights (their saved storages are the weights' share)
WEIGHT_FAMILIES = frozenset({Family.SOFTMAX})


@dataclass(frozen=True)
class GradInfo:
    """One gradient tensor: the gradient of ``of`` (``output``, an operand's position, a parameter)."""

    of: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dims: tuple[str | None, ...]
    dtype: str
    nbytes: int
    memory: str            # "same" (the incoming grad itself), "view" (its storage), "new" (allocated)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(shape=list(self.shape), stride=list(self.stride), dims=list(self.dims))
        return d


@dataclass(frozen=True)
class BackwardRow:
    """The backward of one forward call (``grad of #10 matmul``)."""

    order: int
    event: int | None       # the forward row it differentiates (None: a call without a row)
    op: str
    nodes: tuple[str, ...]  # the autograd nodes that ran for it, in order
    arrived: tuple[GradInfo, ...]   # the gradient of each of its outputs
    made: tuple[GradInfo, ...]      # the gradients it sends back to its operands
    sentence: str = ""
    module: str = ""        # the module path the forward call ran in (``h.3.attn``), "" outside any

    def to_dict(self) -> dict[str, Any]:
        return {"order": self.order, "event": self.event, "op": self.op, "nodes": list(self.nodes),
                "arrived": [g.to_dict() for g in self.arrived], "made": [g.to_dict() for g in self.made],
                "sentence": self.sentence, "module": self.module}


@dataclass(frozen=True)
class SavedInfo:
    """One tensor autograd kept for the backward."""

    index: int
    event: int | None       # the forward row whose node saved it
    op: str                 # that row's op, or the autograd node's name where no row claimed it
    saver: str              # the autograd node that saved it (``BmmBackward0``)
    shape: tuple[int, ...]
    dims: tuple[str | None, ...]
    nbytes: int
    storage_bytes: int
    shares_with: int | None   # an earlier saved tensor on the same storage (a view of it, or itself)
    parameter: bool
    weights: bool             # its storage holds attention weights (a softmax's result)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(shape=list(self.shape), dims=list(self.dims))
        return d


@dataclass(frozen=True)
class BackwardReport:
    """The backward of one traced forward."""

    rows: tuple[BackwardRow, ...]
    params: tuple[GradInfo, ...]     # each parameter's ``.grad`` after the backward (``of``: its name)
    saved: tuple[SavedInfo, ...]
    note: str = ""                   # why there is no backward, when there is none
    runs: int = 1                    # backward passes the traced code ran (a training loop's steps): the first is shown
    alike: int = 1                   # how many of them ran the same autograd nodes as the first (itself included)

    @property
    def saved_bytes(self) -> int:
        """Bytes of the distinct storages the saved tensors keep alive (a view counts once)."""
        return sum(s.storage_bytes for s in self.saved if s.shares_with is None)

    @property
    def activation_bytes(self) -> int:
        """The same, less the parameters' storages (kept anyway)."""
        return sum(s.storage_bytes for s in self.saved if s.shares_with is None and not s.parameter)

    @property
    def weights_bytes(self) -> int:
        """The share of :attr:`saved_bytes` that holds attention weights."""
        return sum(s.storage_bytes for s in self.saved if s.shares_with is None and s.weights)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "params": [p.to_dict() for p in self.params],
                "saved": [s.to_dict() for s in self.saved],
                "saved_bytes": self.saved_bytes, "activation_bytes": self.activation_bytes,
                "weights_bytes": self.weights_bytes, "note": self.note, "runs": self.runs, "alike": self.alike}


def dims_of(inference, node: int | None, shape: tuple[int, ...]) -> tuple[str | None, ...]:
    """The forward's labels of ``node`` when its shape is ``shape`` (else none: a name is never guessed)."""
    if node is None:
        return (None,) * len(shape)
    axes = inference.axes_of(node)
    labels = inference.namer.dims_of(axes)
    sizes = ax.sizes_of(axes)
    return tuple(labels) if sizes == tuple(shape) and len(labels) == len(shape) else (None,) * len(shape)


def grad_info(of: str, tensor, dims, arrived=(), memory: str = "new") -> GradInfo:
    """What torch says about one gradient, and whether it is (a view of) one of ``arrived``."""
    storage = tensor.untyped_storage().data_ptr()
    for a in arrived:
        if a is tensor:
            memory = "same"
            break
        if a is not None and storage and a.untyped_storage().data_ptr() == storage:
            memory = "view"
    return GradInfo(of, tuple(tensor.shape), tensor.stride(), tuple(dims),
                    str(tensor.dtype).removeprefix("torch."), spanned_bytes(tensor), memory)


def spanned_bytes(tensor) -> int:
    """The bytes of memory the tensor's elements reach: its size when no axis repeats an element, less
    where one does (the gradient of a ``sum`` is one ``1`` expanded to the output's shape, stride 0)."""
    if tensor.numel() == 0:
        return 0
    reach = 1 + sum((size - 1) * abs(step) for size, step in zip(tensor.shape, tensor.stride()))
    return min(reach, tensor.numel()) * tensor.element_size()


def text_of(dims: tuple[str | None, ...], shape: tuple[int, ...]) -> str:
    """``[B, H, T, d_k]``, a size where an axis has no name."""
    return "[" + ", ".join(d if d else str(s) for d, s in zip(dims, shape)) + "]"
