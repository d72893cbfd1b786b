"""Inputs the checker feeds to a learner's function, drawn at random for every check (imports torch).

The parent draws them and sends them to the child; the learner never sees fixed, public cases.

* values that encode their own position: data-movement exercises get shuffled distinct integers,
  so every output element says which input element it came from (``decode``);
* sizes that are all different (B != T != H != d_k, none equal to 3), so a wrong order shows in the
  shape; then sizes that coincide, so a shape check alone cannot pass a wrong order; then odd ones
  (1s and primes), so an answer tuned to a few sizes fails.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

#: The kinds of case, in the order they run: every size different, sizes that coincide, odd ones (1s, primes),
#: large ones (T and d_k up to 64), and distinct sizes whose tensors are not contiguous (each lives inside
#: a wider buffer, at an offset), so an answer that assumes strides fails.
KINDS = ("distinct", "distinct", "equal", "odd", "odd", "large", "strided")
_AXES = ("B", "T", "H", "d_k", "T_k", "H_kv", "n_rep")


def draw_sizes(kind: str, rng: random.Random, taken: dict[str, set[int]] | None = None) -> dict[str, int]:
    """One random size set of ``kind``; in ``distinct`` no two sizes (nor D = H * d_k, nor 3) coincide, and no
    axis takes a size it holds in ``taken`` (the earlier distinct cases of the same check)."""
    if kind == "equal":
        n = rng.choice((2, 4, 5))
        return dict.fromkeys(_AXES, n)
    if kind == "large":
        s = dict(B=rng.choice((1, 2)), T=rng.randint(33, 64), H=rng.choice((2, 4, 5)), d_k=rng.randint(17, 64),
                 T_k=rng.randint(12, 31), H_kv=rng.choice((2, 3)), n_rep=rng.choice((2, 3)))
        return s
    if kind == "strided":
        return draw_sizes("distinct", rng, taken)
    if kind == "odd":
        pick = [1, 1, rng.choice((2, 5, 7)), rng.choice((1, 3, 7)), rng.choice((1, 6, 11)), rng.choice((1, 2)), 1]
        rng.shuffle(pick)
        return dict(zip(_AXES, pick))
    while True:
        values = rng.sample((2, 4, 5, 6, 7, 8, 9), len(_AXES))
        s = dict(zip(_AXES, values))
        others = set(values) | {3}
        fresh = all(v not in (taken or {}).get(axis, ()) for axis, v in s.items())
        if fresh and s["H"] * s["d_k"] not in others and s["H_kv"] * s["n_rep"] not in others:
            return s


@dataclass
class Inputs:
    """Positional arguments for one call, with axis names for the tracer."""

    case: str
    args: list[Any]
    names: list[str | None]
    dims: dict[str, int]
    sizes: dict[str, int] = field(default_factory=dict)
    labels: tuple[str, ...] = ()  # what explanations call each tensor input (default: the first is ``x``)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items())

    def fresh(self) -> list[Any]:
        """A deep copy of the arguments (each function gets its own), with the same strides and offsets."""
        return [same_layout_copy(a) if isinstance(a, torch.Tensor) else a for a in self.args]


def same_layout_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` in new memory with the same storage size, offset and strides (``clone`` would make a
    non-contiguous tensor contiguous)."""
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage().clone(), t.storage_offset(), t.shape, t.stride())


def strided(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values in a tensor that is not contiguous: inside a wider buffer, at an offset."""
    if t.dim() == 0:
        return t
    buf = torch.zeros(*t.shape[:-1], t.shape[-1] + 3, dtype=t.dtype)
    out = buf[..., 2:2 + t.shape[-1]]
    out.copy_(t)
    return out


def code(*shape: int, g: torch.Generator | None = None) -> torch.Tensor:
    """Distinct integer values in ``shape``, shuffled: each says which element it is (:func:`decode`)."""
    n = math.prod(shape)
    if g is None:
        return torch.arange(n, dtype=torch.float32).reshape(shape)
    offset = int(torch.randint(0, 1000, (1,), generator=g))
    return (torch.randperm(n, generator=g) + offset).to(torch.float32).reshape(shape)


def small(*shape: int, g: torch.Generator) -> torch.Tensor:
    """Small integer values (-3..3) so sums and products stay exact."""
    return torch.randint(-3, 4, shape, generator=g).to(torch.float32)


def _tokens(s, g):
    D = s["H"] * s["d_k"]
    return [code(s["B"], s["T"], D, g=g), s["H"]], ["B T D", None], dict(B=s["B"], T=s["T"], D=D, H=s["H"])


def _heads(s, g):
    D = s["H"] * s["d_k"]
    return ([code(s["B"], s["H"], s["T"], s["d_k"], g=g)], ["B H T d_k"],
            dict(B=s["B"], T=s["T"], D=D, H=s["H"]))


def _heads_pair(s, g):
    shape = (s["B"], s["H"], s["T"], s["d_k"])
    return ([small(*shape, g=g), small(*shape, g=g)], ["B H T d_k", "B H T_k d_k"],
            dict(B=s["B"], T=s["T"], T_k=s["T"], H=s["H"], d_k=s["d_k"]))


def _scores(s, g):
    scores = torch.randn(s["B"], s["H"], s["T"], s["T"], generator=g)
    return [scores], ["B H T T_k"], dict(B=s["B"], T=s["T"], T_k=s["T"], H=s["H"])


def _keep(B: int, T: int, lengths: list[int]) -> torch.Tensor:
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)


def _padding(s, g, empty: bool = False):
    B, T = s["B"], s["T"]
    lengths = [T - i % T if i % 2 == 0 else max(1, T - 2) for i in range(B)]
    if empty:
        lengths[-1] = 0
    (scores,), _, dims = _scores(s, g)
    return [scores, _keep(B, T, lengths)], ["B H T T_k", "B T_k"], dims


def _cross(s, g):
    D = s["H"] * s["d_k"]
    q = small(s["B"], s["T"], D, g=g)
    k = small(s["B"], s["T_k"], D, g=g)
    return ([q, k, s["H"]], ["B T D", "B T_k D", None],
            dict(B=s["B"], T=s["T"], T_k=s["T_k"], D=D, H=s["H"]))


def _kv_heads(s, g):
    x = code(s["B"], s["H_kv"], s["T"], s["d_k"], g=g)
    return ([x, s["n_rep"]], ["B H_kv T d_k", None],
            dict(B=s["B"], T=s["T"], H=s["H_kv"] * s["n_rep"], H_kv=s["H_kv"], d_k=s["d_k"]))


def _qkv(s, g):
    D = s["H"] * s["d_k"]
    return ([code(s["B"], s["T"], 3 * D, g=g), s["H"]], ["B T 3*D", None],
            dict(B=s["B"], T=s["T"], D=D, H=s["H"]))


def code_after(first: torch.Tensor, *shape: int, g: torch.Generator | None = None) -> torch.Tensor:
    """Like :func:`code`, with every value above those of ``first`` (two inputs never share a value)."""
    return code(*shape, g=g) + float(first.max()) + 1


def _kv_cache(s, g):
    B, H_kv, T, d_k = s["B"], s["H_kv"], s["T"], s["d_k"]
    cache = code(B, H_kv, T, d_k, g=g)                      # (B, H_kv, T, d_k)
    step = code_after(cache, B, H_kv, 1, d_k, g=g)          # (B, H_kv, 1, d_k)
    return [cache, step], ["B H_kv T d_k", "B H_kv T_new d_k"], dict(B=B, T=T, H_kv=H_kv, d_k=d_k)


def _decode(s, g):
    B, H, T, d_k = s["B"], s["H"], s["T"], s["d_k"]
    q = small(B, H, 1, d_k, g=g)                            # (B, H, 1, d_k): the newest token's query
    k = small(B, H, T + 1, d_k, g=g)                        # (B, H, T+1, d_k): the cache and the new key
    return [q, k], ["B H T_q d_k", "B H T_k d_k"], dict(B=B, H=H, T_k=T + 1, d_k=d_k)


def image_sizes(s: dict[str, int]) -> dict[str, int]:
    """An image's sizes from a drawn size set: channels C, patch side p, h x w patches."""
    return dict(B=s["B"], C=s["H_kv"], p=s["n_rep"], h=s["T"], w=s["T_k"])


def _image(s, g):
    i = image_sizes(s)
    x = code(i["B"], i["C"], i["h"] * i["p"], i["w"] * i["p"], g=g)  # (B, C, H_img, W_img)
    return ([x, i["p"]], ["B C H_img W_img", None],
            dict(B=i["B"], C=i["C"], N=i["h"] * i["w"], H_img=i["h"] * i["p"], W_img=i["w"] * i["p"]))


def _cls(s, g):
    B, N, D = s["B"], s["T"], s["H"] * s["d_k"]
    tokens = code(B, N, D, g=g)                             # (B, N, D)
    cls = code_after(tokens, 1, 1, D, g=g)                  # (1, 1, D): one learned vector
    return [tokens, cls], ["B N D", "1 1 D"], dict(B=B, N=N, D=D)


def rope_angles(T: int, d_k: int, start: int) -> torch.Tensor:
    """The rotary angles [T, d_k / 2] of positions start .. start + T - 1 (base 10000)."""
    inv_freq = 10000.0 ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # (d_k/2,)
    pos = torch.arange(start, start + T, dtype=torch.float64)                       # (T,)
    return torch.outer(pos, inv_freq).float()                                        # (T, d_k/2)


def _even(n: int) -> int:
    return n + n % 2


def _rope(s, g):
    B, H, T, d_k = s["B"], s["H"], s["T"], _even(s["d_k"])
    x = small(B, H, T, d_k, g=g)                            # (B, H, T, d_k)
    angles = rope_angles(T, d_k, int(torch.randint(0, 50, (1,), generator=g)))
    table = torch.cat([angles, angles], dim=-1)             # (T, d_k): rotate_half's layout
    return ([x, table.cos(), table.sin()], ["B H T d_k", "T d_k", "T d_k"], dict(B=B, H=H, T=T, d_k=d_k))


def _rope_pairs(s, g):
    B, H, T, d_k = s["B"], s["H"], s["T"], _even(s["d_k"])
    x = small(B, H, T, d_k, g=g)                            # (B, H, T, d_k)
    angles = rope_angles(T, d_k, int(torch.randint(0, 50, (1,), generator=g)))
    return [x, angles], ["B H T d_k", "T d_half"], dict(B=B, H=H, T=T, d_k=d_k)


def _token_major(s, g):
    shape = (s["B"], s["T"], s["H"], s["d_k"])
    return ([small(*shape, g=g) for _ in range(3)], ["B T H d_k"] * 3,
            dict(B=s["B"], T=s["T"], H=s["H"], d_k=s["d_k"]))


def _sdpa_padding(s, g):
    B, H, T, d_k = s["B"], s["H"], s["T"], s["d_k"]
    lengths = [T - i % T if i % 2 == 0 else max(1, T - 2) for i in range(B)]
    if B == 1 and T > 1:
        lengths = [T - 1]
    q, k, v = (small(B, H, T, d_k, g=g) for _ in range(3))  # (B, H, T, d_k) each
    pad = ~_keep(B, T, lengths)                             # (B, T): True = padding, as nn.MultiheadAttention
    return ([q, k, v, pad], ["B H T d_k", "B H T_k d_k", "B H T_k d_k", "B T_k"],
            dict(B=B, H=H, T=T, d_k=d_k))


def normal(*shape: int, g: torch.Generator) -> torch.Tensor:
    """Values drawn from N(0, 1): a softmax's inputs (small integers would tie its weights)."""
    return torch.randn(*shape, generator=g)


def _head_grads(s, g):
    T, T_k, d_k = s["T"], s["T_k"], s["d_k"]
    q, dy = normal(T, d_k, g=g), normal(T, d_k, g=g)        # (T, d_k) each: one head's queries, dY
    k, v = normal(T_k, d_k, g=g), normal(T_k, d_k, g=g)     # (T_k, d_k) each: its keys and values
    return [q, k, v, dy], ["T d_k", "T_k d_k", "T_k d_k", "T d_k"], dict(T=T, T_k=T_k, d_k=d_k)


def linear_sizes(s: dict[str, int]) -> dict[str, int]:
    """A linear layer's sizes from a drawn size set: D_in features in, D_out out."""
    return dict(B=s["B"], T=s["T"], D_in=s["d_k"], D_out=s["H"])


def _linear_grads(s, g):
    B, T, D_in, D_out = linear_sizes(s).values()
    x, dy = small(B, T, D_in, g=g), small(B, T, D_out, g=g)  # (B, T, D_in), (B, T, D_out)
    weight = small(D_out, D_in, g=g)                        # (D_out, D_in): nn.Linear's layout
    return ([x, weight, dy], ["B T D_in", "D_out D_in", "B T D_out"],
            dict(B=B, T=T, D_in=D_in, D_out=D_out))


def _kv_grads(s, g):
    B, H_kv, n_rep, T, d_k = s["B"], s["H_kv"], s["n_rep"], s["T"], s["d_k"]
    dy = small(B, H_kv * n_rep, T, d_k, g=g)                # (B, H, T, d_k): the grad of repeat_kv's output
    return [dy, n_rep], ["B H T d_k", None], dict(B=B, H=H_kv * n_rep, H_kv=H_kv, T=T, d_k=d_k)


BUILDERS: dict[str, Callable] = {
    "tokens": _tokens, "heads": _heads, "heads_pair": _heads_pair, "scores": _scores, "padding": _padding,
    "padding_empty": lambda s, g: _padding(s, g, empty=True), "cross": _cross, "kv_heads": _kv_heads,
    "qkv": _qkv, "kv_cache": _kv_cache, "decode": _decode, "image": _image, "cls": _cls, "rope": _rope,
    "rope_pairs": _rope_pairs, "token_major": _token_major, "sdpa_padding": _sdpa_padding,
    "head_grads": _head_grads, "linear_grads": _linear_grads, "kv_grads": _kv_grads, "heads_grad": _heads,
}

SHOWN = {
    "scores": ("B", "H", "T"), "padding": ("B", "H", "T"), "padding_empty": ("B", "H", "T"),
    "cross": ("B", "T", "T_k", "H", "d_k"), "kv_heads": ("B", "H_kv", "n_rep", "T", "d_k"),
    "kv_cache": ("B", "H_kv", "T", "d_k"), "cls": ("B", "T", "H", "d_k"),
    "head_grads": ("T", "T_k", "d_k"), "kv_grads": ("B", "H_kv", "n_rep", "T", "d_k"),
}

#: What explanations call the tensor inputs of builders with more than one input whose values are traced.
LABELS = {"kv_cache": ("cache", "step"), "cls": ("tokens", "cls"), "heads_grad": ("dy",)}

#: Builders whose sizes, as the learner reads them, are computed from the drawn ones.
DERIVED: dict[str, Callable[[dict[str, int]], dict[str, int]]] = {
    "image": image_sizes,
    "linear_grads": linear_sizes,
    "cls": lambda s: dict(B=s["B"], N=s["T"], D=s["H"] * s["d_k"]),
    "rope": lambda s: dict(B=s["B"], H=s["H"], T=s["T"], d_k=_even(s["d_k"])),
    "rope_pairs": lambda s: dict(B=s["B"], H=s["H"], T=s["T"], d_k=_even(s["d_k"])),
}


def _size_cases(rng: random.Random) -> list[Inputs]:
    heads = rng.choice((2, 4, 5, 6, 8))
    d_k = rng.choice([k for k in (3, 7, 9, 16) if k != heads])
    odd_heads = rng.choice((3, 5, 7))
    calls = [("distinct", heads * d_k, heads), ("indivisible", heads * d_k + 1, heads),
             ("indivisible", odd_heads * rng.choice((4, 6)) + rng.randrange(2, odd_heads), odd_heads),
             ("equal", heads, heads), ("smaller", rng.randint(1, heads - 1), heads)]
    return [Inputs(case, [d, h], [None, None], {}, dict(d_model=d, heads=h)) for case, d, h in calls]


def _param_cases(rng: random.Random) -> list[Inputs]:
    a, b = rng.sample((8, 12, 20, 24, 36, 48), 2)
    return [Inputs(case, [d, bias], [None, None], {}, dict(d_model=d, bias=bias))
            for case, d, bias in (("distinct", a, True), ("distinct", b, False), ("odd", 1, True))]


def draw(kind: str, rng: random.Random | None = None) -> list[Inputs]:
    """Fresh random input cases for an exercise's builder, in the order they are checked."""
    rng = rng or random.Random()
    if kind == "sizes":
        return _size_cases(rng)
    if kind == "params":
        return _param_cases(rng)
    out = []
    taken: dict[str, set[int]] = {axis: set() for axis in _AXES}  # a file that special-cases one size (B == 2)
    for case in KINDS:                                              # meets the others in a later distinct case
        s = draw_sizes(case, rng, taken)
        if case in ("distinct", "strided"):
            for axis, v in s.items():
                taken[axis].add(v)
        g = torch.Generator().manual_seed(rng.getrandbits(31))
        args, names, dims = BUILDERS[kind](s, g)
        if case == "strided":
            args = [strided(a) if isinstance(a, torch.Tensor) else a for a in args]
        shown = DERIVED[kind](s) if kind in DERIVED else {k: s[k] for k in SHOWN.get(kind, ("B", "T", "H", "d_k"))}
        out.append(Inputs(case, args, names, dims, shown, LABELS.get(kind, ())))
    return out


def decode(value: float, tensor: torch.Tensor) -> tuple[int, ...] | None:
    """Which element of a :func:`code` input holds ``value`` (None when no element does)."""
    return decode_many([value], tensor)[0]


def decode_many(values: list[float], tensor: torch.Tensor) -> list[tuple[int, ...] | None]:
    """:func:`decode` for each of ``values``, with one sort of ``tensor``: each value is compared as
    ``tensor == value`` compares it (in ``torch.result_type(tensor, value)``); an index only where
    exactly one element equals it."""
    if not values:
        return []
    kind = torch.result_type(tensor, 1.0)
    flat = tensor.detach().reshape(-1).to(kind)
    wanted = torch.tensor([float(v) for v in values], dtype=torch.float64).to(kind)
    ordered, where = flat.sort(stable=True)
    ordered = ordered[:int((ordered == ordered).sum())]  # (NaN sorts last and equals nothing: not searched)
    first = torch.searchsorted(ordered, wanted)
    past = torch.searchsorted(ordered, wanted, right=True)
    found = []
    for v, lo, hi in zip(wanted.tolist(), first.tolist(), past.tolist()):
        if v != v or hi - lo != 1:
            found.append(None)
            continue
        flat_index, index = int(where[lo]), []
        for size in reversed(tensor.shape):
            flat_index, i = divmod(flat_index, size)
            index.append(i)
        found.append(tuple(reversed(index)))
    return found
