"""What shapetrace knows about one op: :class:`OpSpec`, its :class:`Family` and its reduction's dtype.

One :class:`OpSpec` holds every fact the engine keeps about an op (the registry of
:mod:`shapetrace.engine.op_table` lists them; :mod:`shapetrace.engine.ops` looks them up, by the function
the capture sees). No table keyed by an op's name sits beside it: a rule asks the spec
(``spec.family``, ``spec.scaling``, ``spec.cheap``), never ``name in SOME_SET``.

Pure Python: nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class Family(Enum):
    """Ops that diagnostics, diagrams and sentences treat alike: a rule asks for a family, never for
    op names, so ``torch.mm(q, k)`` is checked like ``q @ k`` and ``swapaxes`` is drawn like ``transpose``."""

    NONE = "none"
    RESHAPE = "reshape"               # view, reshape, flatten, unflatten, view_as, reshape_as
    AXIS_ORDER = "axis order"         # transpose, swapaxes, swapdims, permute, movedim, moveaxis, t, mT, T
    EXPAND = "expand"                 # expand, expand_as, broadcast_to
    SIZE_ONE_AXIS = "size-1 axis"     # unsqueeze, squeeze
    SLICE = "slice"                   # narrow, select, __getitem__
    SPLIT = "split"                   # split, chunk, unbind, tensor_split
    JOIN = "join"                     # cat, concat, concatenate (parts lined up along every other axis)
    WRITE = "write"                   # cache[..., s:e, :] = k, index_copy_, copy_: values written in place
    CONTIGUOUS = "contiguous"
    PRODUCT = "product"               # mm, bmm, matmul, @, __rmatmul__, baddbmm, einsum
    PROJECTION = "projection"         # linear, addmm
    FUSED_ATTENTION = "fused attention"   # F.scaled_dot_product_attention
    MODULE_ATTENTION = "module attention"  # nn.MultiheadAttention's functional form
    SOFTMAX = "softmax"               # softmax, log_softmax
    NORMALISE = "normalise"           # layer_norm, rms_norm: over the last axes, which must be features
    MASK_FILL = "mask fill"           # masked_fill, masked_fill_
    ELEMENTWISE = "elementwise"       # +, *, where...: operands lined up by broadcasting
    DROPOUT = "dropout"
    SCAN = "scan"                     # cumsum, cumprod: running sums or products along one axis
    REDUCE = "reduce"                 # sum, mean, max, norm, F.normalize... along axes (.reductions)
    TRIANGLE = "triangle"             # tril, triu: a causal mask is built with one
    OTHER = "other"


#: families whose ops re-read the same values with a new shape, order or window (or copy them in a new
#: order): each gets a memory-layout diagram and a sentence about its strides
LAYOUT_FAMILIES = frozenset({Family.RESHAPE, Family.AXIS_ORDER, Family.CONTIGUOUS, Family.EXPAND,
                             Family.SIZE_ONE_AXIS, Family.SLICE})
#: families that turn scores into attention weights (softmax, or a fused kernel doing it inside)
ATTENTION_FAMILIES = frozenset({Family.SOFTMAX, Family.FUSED_ATTENTION, Family.MODULE_ATTENTION})
#: families whose operands torch lines up by broadcasting (``scores + mask``, ``q * cos``, ``masked_fill``)
BROADCAST_FAMILIES = frozenset({Family.ELEMENTWISE, Family.MASK_FILL})
#: families whose outputs are attention weights or outputs: an all-NaN row there is a query with no key left
VALUE_CHECKED_FAMILIES = frozenset({Family.SOFTMAX, Family.FUSED_ATTENTION})
#: families that combine two operands into one (q with k): a q, k or v tag does not pass through them
COMBINING_FAMILIES = frozenset({Family.PRODUCT, Family.FUSED_ATTENTION})


class ReduceDtype(Enum):
    """The dtype of a reduction's result."""

    SAME = "same"                      # mean, amax...: the input's
    INDEX = "index"                    # argmax, argmin: int64
    BOOL = "bool"                      # all, any
    INTEGERS_WIDEN = "integers widen"  # sum, prod: integer input gives int64


@dataclass(frozen=True, eq=False)   # (compared and hashed by identity: one object per op)
class OpSpec:
    """What shapetrace knows about one op (every fact of it: nothing about an op lives elsewhere)."""

    name: str
    memory: str                       # "view" | "maybe" | "copy" | "new" (the result aliases, may alias, ...)
    names: Callable | None = None     # (Call) -> list of axes per output; None: outputs unnamed
    row: bool = True
    params: Callable[[tuple, dict], dict] | None = None
    words: str = ""
    operands: Callable[[tuple, dict], list] | None = None   # which arguments are the operands
    inplace: bool = False
    opens: bool = False               # a composite whose inner ops are recorded (nn.MultiheadAttention)
    called_as: str = ""               # an opened composite: what the user called ("nn.MultiheadAttention")
    caller_fix: str = ""              # ... and the fix, at that call, of a finding on one of its inner ops
    params_read_values: bool = False  # its params read tensor values (else: arguments, shapes, dtypes)
    family: Family = Family.OTHER     # which ops rules, diagrams and sentences treat alike
    copies_inside: bool = False       # may copy an operand it cannot fold into one batch (:mod:`.hidden`)
    contraction: str = ""             # a product's rule: "matrix" (last axis · second to last), "subscripts"
    sized: str = ""                   # sizes read from axes name its result: "shape" (zeros(B, T)), "sequence"
    #                                   (full((B, T), v): one sequence only), "count" (arange(n)), "grown"
    #                                   (expand(B, -1, -1)); "" if not (:mod:`.sizes`)
    on_self: bool = False             # a factory method (``x.new_ones(n, m)``): its tensor gives only the dtype and
                                      # device, and the sizes after it name the result as ``sized`` says
    replay: str = ""                  # moves elements: the function its calls are replayed as to follow
    #                                   them (:mod:`.elements`), "torch.gather", "Tensor.unfold"; "" if not
    reads_storage: bool = False       # addresses its operand's memory, not its shape (``as_strided``): replayed on
    #                                   coordinates laid out in memory as the operand was (:mod:`.provenance`)
    #: the one function this op is, as a dotted path, where another function shares its ``__name__``
    #: (``torch.nn.functional.unfold`` copies blocks into columns; ``Tensor.unfold`` makes windows, a view);
    #: "" for an op found under its name (and ``aliases``) in torch, ``torch.Tensor`` and ``torch.nn.functional``
    callable: str = ""
    rank: int | None = None           # operands of one rank only (torch.mm: matrices; torch.bmm: 3-D)
    stacks: bool = False              # its result gets a new axis (the others join along an existing one)
    repeats: bool = False             # copies each element along its axes, in place or in tiles (``repeat``)
    write: str = ""                   # how a write lines its values up: "whole", "rows" or "index"
    short: str = ""                   # the table's name for it, where the name is long
    shows_first: bool = False         # the table's argument text shows its first argument (a list, an equation)
    stride_bound: bool = False        # raises, rather than copies, when the strides cannot express the shape
    shape_of_other: bool = False      # takes the shape of its second operand (``x.view_as(other)``)
    # -- how the capture finds and treats it --------------------------------------------------------
    aliases: tuple[str, ...] = ()     # other names torch gives the same op (``concat``, ``__matmul__``)
    getter: bool = False              # a property read (``x.T``, ``x.mT``): its getter is the function
    cheap: bool = False               # reads metadata only (``size``, ``stride``, ``item``): not recorded
    reads_values: bool = False        # (cheap) hands the values to Python (``item``, ``tolist``): noted, not recorded
    additive: bool = False            # ``a + b``: may add a mask or bias onto scores (recorded in full)
    subtractive: bool = False         # ``a - b``: may take a mask or bias off scores (recorded in full, as ``a + b``)
    scaling: str = ""                 # scales by a number (attention's 1/√d_k): "divides" or "multiplies"
    # -- what it does with its arguments -------------------------------------------------------------
    picks: bool = False               # picks one index of an axis (``x[0]``, ``select``)
    picks_by_index: bool = False      # picks along its ``dim`` by an index tensor, its second operand (``gather``)
    looks_up: bool = False            # one row of a table per entry of its first operand, the index (``embedding``):
    #                                   its result's leading axes are the index's (a guessed index hands on none)
    counts: str = ""                  # its values count positions along an axis (:mod:`.indices`): its "dim"
    #                                   (``argmax``: none, a flat index), or "dim or last" (``argsort``)
    indexes: bool = False             # ``x[index]``: the subscript call (what it picks is in the index)
    cuts_at: int = 0                  # takes a tensor apart along the axis given at this position (0: none)
    reversed: bool = False            # ``a.__rmatmul__(b)`` is ``b @ a``: its operands the other way round
    # -- on the meta device (:mod:`.meta`) ----------------------------------------------------------
    meta: str = ""                    # the rule of :mod:`.meta` that computes its output ("": torch's own)
    true_division: bool = False       # integer operands give a float result (without a rounding mode)
    reduces_to: ReduceDtype = ReduceDtype.SAME   # the dtype of a reduction's result
    maximum: bool = False                        # the largest entry along axes (a softmax's stabiliser: amax, max)
    integer_result: bool = False      # a factory whose default dtype is int64 (``randint``)
    # -- the ``strides`` command -------------------------------------------------------------------
    chain: str = ""                   # replayed from a chain's text: "method" (``.view(2, 3)``), "attribute"
    # -- the backward (:mod:`.backward`) ---------------------------------------------------------------
    #: what its gradient is, in words: ``{out}`` is the incoming grad's shape in names, ``{in0}``, ``{in1}``
    #: the operands' grads, ``{summed}`` the output's leading axes; parts joined by "; " are left out where
    #: an operand gets no gradient. "" where the registry has no sentence for it
    backward: str = ""
    starts_backward: bool = False     # ``loss.backward()``: counted (a script's training steps), never a row

    # -- derived facts: a rule asks these, never for a name ----------------------------------------
    @property
    def moves_layout(self) -> bool:
        """Only moves or re-reads values (a view, a transpose, a slice, a contiguous copy)?"""
        return self.family in LAYOUT_FAMILIES

    @property
    def matrix_product(self) -> bool:
        """A product over the first operand's last axis and the second's second to last (``@``, mm, bmm,
        baddbmm): the product family, less einsum, whose subscripts say what it contracts."""
        return self.contraction == "matrix"

    @property
    def by_subscripts(self) -> bool:
        """An einsum: what it contracts is in its recorded ``subscripts``."""
        return self.contraction == "subscripts"

    @property
    def broadcasts(self) -> bool:
        """Lines its operands up by broadcasting (so lined-up axes must mean the same thing)?"""
        return self.family in BROADCAST_FAMILIES

    @property
    def separates(self) -> bool:
        """Takes a tensor apart along one axis (all its parts, or one of them)?"""
        return self.family is Family.SPLIT or self.picks

    @property
    def selects_along_dim(self) -> bool:
        """``select(dim, index)``: one entry along an axis given by number (not by an index expression)."""
        return self.picks and not self.indexes

    @property
    def writes_in_place(self) -> bool:
        """Writes into its first operand (``masked_fill_``, ``add_``, ``x += y``)."""
        return self.inplace or self.meta == "inplace"

    @property
    def value_checked(self) -> bool:
        """Its output holds attention weights or outputs, read once after the run for all-NaN rows."""
        return self.family in VALUE_CHECKED_FAMILIES

    @property
    def combines(self) -> bool:
        """Combines operands (q with k), so a q, k or v tag stops there."""
        return self.family in COMBINING_FAMILIES

    @property
    def views_to_a_shape(self) -> bool:
        """``view(sizes)``: never copies, and takes the new shape as numbers."""
        return self.stride_bound and not self.shape_of_other
