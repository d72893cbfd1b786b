"""Inputs the checker feeds to a learner's function (imports torch; runs in the child).

Two ideas make wrong axis orders visible:

* values that encode their own position: data-movement exercises get
  ``arange`` tensors, so every output element says which input element it
  came from (``decode``);
* sizes that are all different (B != T != H != d_k), so a wrong order shows
  in the shape, plus a second case where they coincide, so a shape check
  alone cannot pass a wrong order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

#: Sizes per case. "distinct": every size different; "equal": sizes coincide.
CASES: dict[str, dict[str, dict[str, int]]] = {
    "distinct": {"main": dict(B=2, T=5, H=3, d_k=4, T_k=7, H_kv=6, n_rep=3)},
    "equal": {"main": dict(B=3, T=3, H=3, d_k=3, T_k=3, H_kv=3, n_rep=3)},
}


@dataclass
class Inputs:
    """Positional arguments for one call, with axis names for the tracer."""

    case: str
    args: list[Any]
    names: list[str | None]
    dims: dict[str, int]
    sizes: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items())

    def fresh(self) -> list[Any]:
        """A deep copy of the arguments (each function gets its own)."""
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in self.args]


def code(*shape: int) -> torch.Tensor:
    """``arange`` in ``shape``: each value is its own flat index (exact in float32)."""
    return torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32).reshape(shape)


def small(*shape: int, seed: int = 0) -> torch.Tensor:
    """Small integer values (-3..3) so sums and products stay exact."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-3, 4, shape, generator=g).to(torch.float32)


def _tokens(s):
    D = s["H"] * s["d_k"]
    return [code(s["B"], s["T"], D), s["H"]], ["B T D", None], dict(B=s["B"], T=s["T"], D=D, H=s["H"])


def _heads(s):
    D = s["H"] * s["d_k"]
    return ([code(s["B"], s["H"], s["T"], s["d_k"])], ["B H T d_k"],
            dict(B=s["B"], T=s["T"], D=D, H=s["H"]))


def _heads_pair(s):
    shape = (s["B"], s["H"], s["T"], s["d_k"])
    return ([small(*shape, seed=4), small(*shape, seed=5)], ["B H T d_k", "B H T_k d_k"],
            dict(B=s["B"], T=s["T"], T_k=s["T"], H=s["H"], d_k=s["d_k"]))


def _scores(s):
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(s["B"], s["H"], s["T"], s["T"], generator=g)
    return [scores], ["B H T T_k"], dict(B=s["B"], T=s["T"], T_k=s["T"], H=s["H"])


def _keep(B: int, T: int, lengths: list[int]) -> torch.Tensor:
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)


def _padding(s, empty: bool = False):
    B, T = s["B"], s["T"]
    lengths = [T - i % T if i % 2 == 0 else max(1, T - 2) for i in range(B)]
    if empty:
        lengths[-1] = 0
    (scores,), _, dims = _scores(s)
    return [scores, _keep(B, T, lengths)], ["B H T T_k", "B T_k"], dims


def _cross(s):
    D = s["H"] * s["d_k"]
    q = small(s["B"], s["T"], D, seed=2)
    k = small(s["B"], s["T_k"], D, seed=3)
    return ([q, k, s["H"]], ["B T D", "B T_k D", None],
            dict(B=s["B"], T=s["T"], T_k=s["T_k"], D=D, H=s["H"]))


def _kv_heads(s):
    x = code(s["B"], s["H_kv"], s["T"], s["d_k"])
    return ([x, s["n_rep"]], ["B H_kv T d_k", None],
            dict(B=s["B"], T=s["T"], H=s["H_kv"] * s["n_rep"], H_kv=s["H_kv"], d_k=s["d_k"]))


def _qkv(s):
    D = s["H"] * s["d_k"]
    return ([code(s["B"], s["T"], 3 * D), s["H"]], ["B T 3*D", None],
            dict(B=s["B"], T=s["T"], D=D, H=s["H"]))


_SIZE_CALLS = {"distinct": (12, 3), "indivisible": (10, 4), "equal": (9, 9)}
_PARAM_CALLS = {"distinct": (12, True), "equal": (16, False)}

BUILDERS: dict[str, Callable] = {
    "tokens": _tokens, "heads": _heads, "heads_pair": _heads_pair, "scores": _scores, "padding": _padding,
    "padding_empty": lambda s: _padding(s, empty=True), "cross": _cross, "kv_heads": _kv_heads,
    "qkv": _qkv,
}


def cases(kind: str) -> list[str]:
    """The case names a builder runs, in order."""
    if kind == "sizes":
        return list(_SIZE_CALLS)
    if kind == "params":
        return list(_PARAM_CALLS)
    return list(CASES)


def build(kind: str, case: str) -> Inputs:
    """The inputs of one case."""
    if kind == "sizes":
        d_model, heads = _SIZE_CALLS[case]
        return Inputs(case, [d_model, heads], [None, None], {}, dict(d_model=d_model, heads=heads))
    if kind == "params":
        d_model, bias = _PARAM_CALLS[case]
        return Inputs(case, [d_model, bias], [None, None], {}, dict(d_model=d_model, bias=bias))
    s = CASES[case]["main"]
    args, names, dims = BUILDERS[kind](s)
    shown = {k: s[k] for k in _SHOWN.get(kind, ("B", "T", "H", "d_k"))}
    return Inputs(case, args, names, dims, shown)


_SHOWN = {
    "scores": ("B", "H", "T"), "padding": ("B", "H", "T"), "padding_empty": ("B", "H", "T"),
    "cross": ("B", "T", "T_k", "H", "d_k"), "kv_heads": ("B", "H_kv", "n_rep", "T", "d_k"),
}


def decode(value: float, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Which element of an ``arange`` input of ``shape`` holds ``value``."""
    if value != value or value < 0 or value != int(value):
        return None
    flat = int(value)
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx)) if flat == 0 else None
