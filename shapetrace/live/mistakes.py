"""What a wrong shape means: each common wrong answer mapped to the mistake that gives it, read from the
op's own inputs and output (one general reading, never a table of answers per model).

An answer is compared with torch's output and with the op's inputs: the input's shape unchanged (the op
forgotten: "forgot the transpose"), two axes swapped, a run of axes split in the other order ("split D the
wrong way"), a matmul that kept the axis it sums over, a view that would not hold the input's elements,
or the right sizes with names that equal sizes hide.

>>> names = ("B", "T", "H", "d_k")
>>> meaning_of((2, 6, 8, 64), "transpose", [(2, 6, 8, 64)], [names], (2, 8, 6, 64), ("B", "H", "T", "d_k"))
'the input shape unchanged: forgot the transpose'
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from shapetrace.engine.ops import Family, OpSpec, spec_for

Shape = Sequence[int]
Names = Sequence[str | None]


def _name(names: Names, i: int, size: int) -> str:
    """An axis by its name (``H·d_k`` for a merged one), or by its size when unnamed or mixed."""
    label = names[i] if i < len(names) else None
    return label.replace("*", "·") if label and not label.startswith("!") else f"the axis of size {size}"


def _one_swap(answer: Shape, right: Shape) -> tuple[int, int] | None:
    wrong = [i for i, (a, r) in enumerate(zip(answer, right)) if a != r]
    if len(wrong) == 2 and answer[wrong[0]] == right[wrong[1]] and answer[wrong[1]] == right[wrong[0]]:
        return wrong[0], wrong[1]
    return None


def _split_the_other_way(answer: Shape, right: Shape, inputs: Sequence[Shape], names: Sequence[Names]) -> str:
    """The answer reorders a run of the output's axes whose sizes multiply to one axis of the input:
    that input axis was split, and the answer splits it in another order."""
    wrong = [i for i, (a, r) in enumerate(zip(answer, right)) if a != r]
    if not wrong:
        return ""
    lo, hi = wrong[0], wrong[-1] + 1
    if sorted(answer[lo:hi]) != sorted(right[lo:hi]) or hi - lo < 2:
        return ""
    block = math.prod(right[lo:hi])
    for shape, labels in zip(inputs, names):
        for k, size in enumerate(shape):
            if size == block and len(shape) < len(right):
                return f"split {_name(labels, k, size)} the wrong way: the same sizes in another order"
    return ""


def _matmul_reading(answer: Shape, inputs: Sequence[Shape], names: Sequence[Names]) -> str:
    if len(inputs) < 2 or len(inputs[0]) < 2 or len(inputs[1]) < 2:
        return ""
    a, b = inputs[0], inputs[1]
    summed = _name(names[0], len(a) - 1, a[-1])
    if tuple(answer) in (tuple(a), tuple(b)):
        return (f"an operand's shape: a matmul sums over {summed}, keeping the rows of the left "
                "and the columns of the right")
    if tuple(answer) == (*tuple(b)[:-1], a[-1]) and tuple(b)[:-1] != tuple(a)[:-1]:
        return "the product in the other order (right @ left): a matmul is not commutative"
    return ""


def meaning_of(answer: Shape, op: OpSpec | str, inputs: Sequence[Shape], input_names: Sequence[Names],
               right: Shape, right_names: Names) -> str:
    """What a wrong shape ``answer`` says about the mistake behind it ("" when nothing general fits)."""
    answer, right = tuple(answer), tuple(right)
    first = tuple(inputs[0]) if inputs else ()
    spec = spec_for(op)
    op = spec.name
    if answer == right:
        return ""
    if spec.matrix_product:
        reading = _matmul_reading(answer, inputs, input_names)
        if reading:
            return reading
    if answer == first:
        return f"the input shape unchanged: forgot the {op}"
    if len(answer) != len(right):
        return f"{len(answer)} axes where torch gives {len(right)}"
    split = _split_the_other_way(answer, right, inputs, input_names)
    if split:
        return split
    swap = _one_swap(answer, right)
    if swap:
        i, j = swap
        return (f"axes {i} and {j} swapped: torch has {_name(right_names, i, right[i])} before "
                f"{_name(right_names, j, right[j])}")
    if spec.family is Family.RESHAPE and first and math.prod(answer) != math.prod(first):
        return f"holds {math.prod(answer)} elements, the input {math.prod(first)}: a {op} keeps every element"
    if sorted(answer) == sorted(right):
        return "the right sizes in the wrong order"
    return ""
