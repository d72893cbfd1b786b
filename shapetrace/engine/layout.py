"""Where the elements of one tensor live in memory, as plain data (no Rich, no torch).

A :class:`Layout` is computed from what torch reports (shape, stride, storage
offset) plus the axis names. It answers three questions a stride diagram draws:

* the storage strip: memory in address order, at *block* granularity. A block is
  a maximal run of consecutive addresses along the unit-stride axis (``64 floats
  of head 3, token 2``), cut at head boundaries when the run axis is ``D``
  and the head count is known. Each block carries the logical index range that
  lives there and a colour *key*: its index along one axis (heads by default);
* the walk: reading the tensor in logical order (last index fastest), how far
  memory jumps between one block (or element) and the next;
* the reason, in plain English, why a tensor is not contiguous.

Blocks are computed on demand from their number, so a tensor of any size (meta
tensors included) costs only the blocks that are drawn.

>>> lay = Layout((2, 8, 6, 64), (3072, 64, 512, 1), dims=("B", "H", "T", "d_k"))
>>> lay.n_blocks, lay.block(1).label, lay.block(1).address
(96, '0,1,0,:', 64)
>>> lay.walk().text()
'+512 ×5 to the next T, then back −2,496 to the next H, then +64 to the next B'
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

#: Axis names used as the colour key first (one colour per head).
HEAD_NAMES = ("H", "H_kv")
#: Axis names that are tokens: the key when there is no head axis.
TOKEN_NAMES = ("T", "S", "T_q", "T_k", "N", "L")
#: Run axes that hold all heads' features side by side: cut them per head.
HEAD_PACKED = ("D", "H*d_k", "D_kv", "H_kv*d_k")

@dataclass(frozen=True)
class AxisView:
    """One logical axis: its name, size and stride (in elements)."""

    name: str
    size: int
    stride: int

    def text(self) -> str:
        return f"{self.name}={self.size:,} · stride {self.stride:,}"


@dataclass(frozen=True)
class Block:
    """A maximal run of consecutive addresses and the logical indices living there.

    ``index`` has one entry per logical axis: an ``int``, a ``(start, stop)``
    range (the run axis), or ``None`` for a stride-0 axis (every index shares
    this memory). ``label`` writes it as ``0,3,2,:`` (``x[0, 3, 2, :]``).
    """

    number: int
    address: int
    length: int
    index: tuple
    key: int
    gap_before: int
    label: str

    def selectors(self) -> tuple:
        """The index as Python objects for ``x[...]`` (stride-0 axes read at 0)."""
        return tuple(0 if i is None else slice(*i) if isinstance(i, tuple) else i for i in self.index)


def _index_text(i, full: bool) -> str:
    if i is None:
        return "*"
    if isinstance(i, tuple):
        return ":" if full else f"{i[0]}:{i[1]}"
    return str(i)


@dataclass(frozen=True)
class Elided:
    """Blocks left out of a strip (``…``)."""

    count: int


@dataclass(frozen=True)
class Step:
    """One kind of jump in the walk: moving to the next index of ``axis``."""

    axis: str
    delta: int
    repeats: int


@dataclass(frozen=True)
class Walk:
    """How memory is visited when the tensor is read in logical order."""

    unit: str
    unit_len: int
    steps: tuple[Step, ...]

    @property
    def smooth(self) -> bool:
        """True when every step lands right after the previous unit (no jump)."""
        return all(s.delta == self.unit_len for s in self.steps)

    def text(self) -> str:
        """``+512 ×5 to the next T, then back −2,496 to the next H, ...``."""
        if not self.steps:
            return "a single " + self.unit
        if self.smooth:
            return f"no jumps: each {self.unit} starts where the previous one ends"
        parts = []
        for n, s in enumerate(self.steps):
            jump = f"+{s.delta:,}" if s.delta >= 0 else f"back −{-s.delta:,}"
            times = f" ×{s.repeats:,}" if n == 0 and s.repeats > 1 else ""
            parts.append(f"{jump}{times} to the next {s.axis}")
        return ", then ".join(parts)


class Layout:
    """The memory layout of one tensor.

    Args:
        shape: torch's ``tensor.shape``.
        stride: torch's ``tensor.stride()`` (elements, not bytes).
        storage_offset: torch's ``tensor.storage_offset()``.
        dims: axis names (``None`` entries, or no names, are shown as ``dim0``...).
        heads: head count; cuts a ``D``-like run axis into per-head blocks.
        key: name of the axis that colours the blocks (default: heads, then tokens).
        contiguous: torch's ``is_contiguous()`` if known (else worked out the same way).
        dtype: for wording (``floats``).
    """

    def __init__(self, shape: Sequence[int], stride: Sequence[int], storage_offset: int = 0,
                 dims: Sequence[str | None] | None = None, heads: int | None = None,
                 key: str | None = None, contiguous: bool | None = None, dtype: str = "float32"):
        self.shape, self.stride = tuple(shape), tuple(stride)
        self.offset = storage_offset
        names = list(dims) if dims else [None] * len(self.shape)
        self.names = tuple(n or f"dim{i}" for i, n in enumerate(names))
        self.axes = tuple(AxisView(n, s, st) for n, s, st in zip(self.names, self.shape, self.stride))
        self.numel = math.prod(self.shape)
        self.dtype = dtype
        self.contiguous = is_contiguous(self.shape, self.stride) if contiguous is None else contiguous
        self.irregular = overlapping(self.shape, self.stride)
        self.run_dim = self._run_dim()
        self.mem_dims = sorted((i for i, (s, st) in enumerate(zip(self.shape, self.stride))
                                if s > 1 and st != 0 and i != self.run_dim),
                               key=lambda i: -self.stride[i])
        self.key_dim, self.pieces = self._choose_key(key, heads)
        run = self.shape[self.run_dim] if self.run_dim is not None else 1
        self.block_len = run // self.pieces
        self.n_blocks = math.prod(self.shape[i] for i in self.mem_dims) * self.pieces if self.numel else 0

    # -- structure ---------------------------------------------------------
    def _run_dim(self) -> int | None:
        ones = [i for i, (s, st) in enumerate(zip(self.shape, self.stride)) if s > 1 and st == 1]
        return ones[-1] if ones and not self.irregular else None

    def _choose_key(self, key: str | None, heads: int | None) -> tuple[int | None, int]:
        candidates = [i for i, s in enumerate(self.shape) if s > 1 and i != self.run_dim]
        if key is not None and key in self.names:
            i = self.names.index(key)
            return (i, 1) if i in candidates else (None, 1)
        for group in (HEAD_NAMES,):
            for i in candidates:
                if self.names[i] in group:
                    return i, 1
        run = self.run_dim
        if (heads and heads > 1 and run is not None and self.names[run] in HEAD_PACKED
                and self.shape[run] % heads == 0 and not self.irregular):
            return run, heads
        for i in candidates:
            if self.names[i] in TOKEN_NAMES:
                return i, 1
        moving = [i for i in self.mem_dims]
        return (moving[-1], 1) if moving else (None, 1)

    @property
    def key_name(self) -> str | None:
        """What the colour shows: ``H``, or ``H (head of D)`` for a per-head cut of D."""
        if self.key_dim is None:
            return None
        name = self.names[self.key_dim]
        return f"head of {name}" if self.pieces > 1 else name

    @property
    def key_count(self) -> int:
        if self.key_dim is None:
            return 1
        return self.pieces if self.pieces > 1 else self.shape[self.key_dim]

    @property
    def unit(self) -> str:
        """``floats`` for float32, else ``elements``."""
        return "floats" if self.dtype in ("float32", "float") else "elements"

    # -- blocks ------------------------------------------------------------
    def _digits(self, k: int) -> tuple[int, dict[int, int]]:
        piece, rest = k % self.pieces, k // self.pieces
        digits: dict[int, int] = {}
        for i in reversed(self.mem_dims):
            rest, digits[i] = divmod(rest, self.shape[i])
        return piece, digits

    def _address(self, k: int) -> int:
        piece, digits = self._digits(k)
        return self.offset + sum(d * self.stride[i] for i, d in digits.items()) + piece * self.block_len

    def block(self, k: int) -> Block:
        """Block number ``k`` in address order (0 <= k < n_blocks)."""
        if not 0 <= k < self.n_blocks:
            raise IndexError(f"block {k} out of range ({self.n_blocks} blocks)")
        if self.irregular:
            raise ValueError("overlapping strides: memory has no block order")
        piece, digits = self._digits(k)
        index: list = []
        for i, size in enumerate(self.shape):
            if i == self.run_dim:
                lo = piece * self.block_len
                index.append((lo, lo + self.block_len))
            elif size > 1 and self.stride[i] == 0:
                index.append(None)
            else:
                index.append(digits.get(i, 0))
        label = ",".join(_index_text(x, self.pieces == 1) for x in index)
        key = 0
        if self.key_dim is not None:
            key = piece if self.pieces > 1 else digits.get(self.key_dim, 0)
        address = self._address(k)
        gap = address - (self._address(k - 1) + self.block_len) if k else 0
        return Block(k, address, self.block_len, tuple(index), key, gap, label)

    def blocks(self) -> Iterator[Block]:
        for k in range(self.n_blocks):
            yield self.block(k)

    def strip(self, first: int, last: int) -> list[Block | Elided]:
        """The first ``first`` and last ``last`` blocks with one :class:`Elided` between.

        All blocks when they fit in ``first + last + 1`` cells; the first and the
        last block are always kept.
        """
        n = self.n_blocks
        if n <= first + last + 1:
            return list(self.blocks())
        first, last = max(first, 1), max(last, 1)
        head = [self.block(k) for k in range(first)]
        tail = [self.block(k) for k in range(n - last, n)]
        return head + [Elided(n - first - last)] + tail

    def period(self) -> int:
        """Blocks between two changes of the key (1 if the key changes every block)."""
        if self.key_dim is None or self.pieces > 1:
            return 1
        if self.key_dim not in self.mem_dims:
            return max(self.n_blocks, 1)
        faster = self.mem_dims[self.mem_dims.index(self.key_dim) + 1:]
        return math.prod(self.shape[i] for i in faster) * self.pieces

    def gaps(self) -> list[int]:
        """Distinct sizes of unused memory between consecutive blocks (first few blocks)."""
        sizes = {self.block(k).gap_before for k in range(1, min(self.n_blocks, 64))} - {0}
        return sorted(sizes)

    @property
    def span(self) -> tuple[int, int]:
        """Lowest and one-past-highest address used."""
        if not self.numel:
            return self.offset, self.offset
        hi = self.offset + sum((s - 1) * st for s, st in zip(self.shape, self.stride)) + 1
        return self.offset, hi

    # -- walk and reason ---------------------------------------------------
    def walk(self) -> Walk:
        """Memory steps when reading in logical order (one run-axis row at a time if it is last)."""
        live = [i for i, s in enumerate(self.shape) if s > 1]
        by_rows = bool(live) and live[-1] == self.run_dim
        if by_rows:
            run = live.pop()
            unit = f"{self.names[run]} row ({self.shape[run]:,} {self.unit})"
            unit_len = self.shape[run]
        else:
            unit, unit_len = "element", 1
        steps = []
        inner = 0
        for i in reversed(live):
            steps.append(Step(self.names[i], self.stride[i] - inner, self.shape[i] - 1))
            inner += (self.shape[i] - 1) * self.stride[i]
        return Walk(unit, unit_len, tuple(steps))

    def reason(self) -> str:
        """Why the tensor is not contiguous, in plain English ('' when it is)."""
        if self.contiguous:
            return ""
        if self.irregular:
            return "its strides overlap: several indices share the same memory"
        zero = [self.names[i] for i, (s, st) in enumerate(zip(self.shape, self.stride)) if s > 1 and st == 0]
        if zero:
            verb = "has" if len(zero) == 1 else "have"
            return (f"{' and '.join(zero)} {verb} stride 0: one stored value is shown at every index "
                    "along it (expand repeats without copying)")
        return self._inversion() or self._gap()

    def _inversion(self) -> str:
        live = [i for i, s in enumerate(self.shape) if s > 1]
        for a_pos, a in enumerate(live):
            for b in live[a_pos + 1:]:
                if self.stride[a] < self.stride[b]:
                    A, B = self.names[a], self.names[b]
                    return (f"{A} comes before {B} in the shape, but {A}'s stride ({self.stride[a]:,}) is "
                            f"smaller than {B}'s ({self.stride[b]:,}): the {self.shape[a]:,} {A} entries of "
                            f"one {B} sit side by side in memory, so the walk jumps over them")
        return ""

    def _gap(self) -> str:
        live = [i for i, s in enumerate(self.shape) if s > 1]
        if live and self.stride[live[-1]] != 1:
            last = live[-1]
            return (f"{self.names[last]}, the last axis, has stride {self.stride[last]:,}: its elements are "
                    f"not next to each other in memory")
        for a, b in zip(live, live[1:]):
            covered = self.shape[b] * self.stride[b]
            if self.stride[a] != covered:
                return (f"{self.names[a]} has stride {self.stride[a]:,} but one {self.names[a]} entry holds only "
                        f"{self.shape[b]:,} × {self.stride[b]:,} = {covered:,} elements: the "
                        f"{self.stride[a] - covered:,} in between belong to something else (a slice, "
                        f"narrow or select left them out)")
        return "torch reports it as not contiguous"


# ---------------------------------------------------------------------------
# stride facts (pure functions, checked against torch in tests)
# ---------------------------------------------------------------------------

def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    """The strides of a fresh contiguous tensor of ``shape``."""
    out, acc = [], 1
    for size in reversed(shape):
        out.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(out))


def is_contiguous(shape: Sequence[int], stride: Sequence[int]) -> bool:
    """torch's rule: strides match row-major, ignoring size-1 axes."""
    if math.prod(shape) == 0:
        return True
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride)):
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True


def overlapping(shape: Sequence[int], stride: Sequence[int]) -> bool:
    """True when two different indices (on axes with non-zero stride) share an address."""
    reach = 0
    for st, size in sorted((st, s) for s, st in zip(shape, stride) if s > 1 and st != 0):
        if st <= reach:
            return True
        reach += (size - 1) * st
    return False
