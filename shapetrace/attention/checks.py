"""Validation of the attention-variant options of :class:`~shapetrace.attention.config.AttentionConfig`.

Plain Python, no torch: every check raises one :class:`~shapetrace.errors.UsageError`
that names the option, the value and what would work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.attention.catalogue import BREAKS, CATALOGUE, default_pad
from shapetrace.attention.sizes import check_size
from shapetrace.errors import UsageError

#: Ways to compute attention; ``manual`` is the reference the others are checked against.
IMPLS = ("manual", "einops", "fused-qkv", "torch", "sdpa")
MASKS = ("none", "padding")
PAD_SIDES = ("right", "left")

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.attention.config import AttentionConfig


def check_variant(c: AttentionConfig) -> None:
    """Raise a UsageError for any option (or combination) that cannot run; fill default pads."""
    _choice("--impl", c.impl, IMPLS)
    _choice("--mask", c.mask, MASKS)
    _choice("--pad-side", c.pad_side, PAD_SIDES)
    _check_kv_len(c)
    _check_kv_heads(c)
    _check_decode(c)
    _check_image(c)
    _check_pad(c)
    _check_dropout(c)
    _check_impl(c)
    _check_broken(c)


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        import difflib

        close = difflib.get_close_matches(value, allowed, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UsageError(f"{flag} {value!r} is not one of: {', '.join(allowed)}{hint}")


def _whole(flag: str, value) -> None:
    check_size(flag, value)


#: The most decode steps ``--decode`` runs: each step is one more block of ops in the table.
MAX_DECODE = 64
#: Runs that change the shape of the forward pass, and the implementations each of them has.
SHAPE_IMPLS = ("manual", "sdpa")


def _check_decode(c: AttentionConfig) -> None:
    if c.decode is None:
        return
    if isinstance(c.decode, bool) or not isinstance(c.decode, int) or not 1 <= c.decode <= MAX_DECODE:
        got = c.decode if isinstance(c.decode, int) and not isinstance(c.decode, bool) else repr(c.decode)
        raise UsageError(f"--decode must be a whole number of steps from 1 to {MAX_DECODE}, got {got}")
    clash = _first_given(c, {"--kv-len": c.cross, "--mask padding": c.mask == "padding",
                             "--dropout": bool(c.dropout), "--train": c.train, "--image": c.image is not None})
    if clash:
        raise UsageError(f"--decode cannot be combined with {clash}: decoding is one sequence attending over "
                         "its own cache, at inference")
    _shape_impl("--decode", c.impl)
    object.__setattr__(c, "causal", True)   # a decoder: the prompt is causal, a step needs no mask


def _check_image(c: AttentionConfig) -> None:
    if c.image is None:
        if c.patch is not None or c.channels is not None:
            raise UsageError(f"{'--patch' if c.patch is not None else '--channels'} needs --image SIZE")
        return
    check_size("--image", c.image)
    if c.patch is None:
        raise UsageError(f"--image {c.image} needs --patch P: the side of the square patches it is cut into")
    check_size("--patch", c.patch)
    check_size("--channels", c.in_channels)
    if c.image % c.patch:
        ok = [d for d in range(1, min(c.image, 10_000) + 1) if c.image % d == 0]
        raise UsageError(f"--patch {c.patch} does not divide --image {c.image}: a stride-{c.patch} conv would "
                         f"drop the last {c.image % c.patch} pixels of each row. Patch sizes that work: "
                         f"{', '.join(map(str, ok[:12]))}")
    clash = _first_given(c, {"--kv-len": c.cross, "--causal": c.causal, "--mask padding": c.mask == "padding"})
    if clash:
        raise UsageError(f"--image cannot be combined with {clash}: every patch attends to every patch of "
                         "its own image")
    _shape_impl("--image", c.impl)
    object.__setattr__(c, "seq_len", 1 + c.grid ** 2)   # a class token and N patches


def _first_given(c: AttentionConfig, options: dict[str, bool]) -> str | None:
    return next((flag for flag, given in options.items() if given), None)


def _shape_impl(flag: str, impl: str) -> None:
    if impl not in SHAPE_IMPLS:
        raise UsageError(f"{flag} runs with --impl manual or sdpa, not {impl}")


def _check_kv_len(c: AttentionConfig) -> None:
    if c.kv_len is None:
        return
    _whole("--kv-len", c.kv_len)
    if c.causal:
        raise UsageError("--causal needs self-attention: a causal mask hides later tokens of the same "
                         "sequence, but with --kv-len the keys come from another sequence")


def _check_kv_heads(c: AttentionConfig) -> None:
    if c.kv_heads is None:
        return
    _whole("--kv-heads", c.kv_heads)
    if c.kv_heads > c.heads or c.heads % c.kv_heads:
        ok = [d for d in range(1, c.heads + 1) if c.heads % d == 0]
        raise UsageError(f"--kv-heads {c.kv_heads} must divide --heads {c.heads}: each key/value head "
                         f"serves heads / kv_heads query heads, a whole number. Values that work: "
                         f"{', '.join(map(str, ok))} (1 = multi-query attention)")


def _check_pad(c: AttentionConfig) -> None:
    if c.mask != "padding":
        if c.pad:
            raise UsageError("--pad needs --mask padding (it gives the number of padding tokens "
                             "of each sequence)")
        if c.pad_side != "right":
            raise UsageError("--pad-side needs --mask padding")
        return
    if not c.pad:
        object.__setattr__(c, "pad", default_pad(c.batch, c.k_len))
    pad = tuple(c.pad)
    object.__setattr__(c, "pad", pad)
    if len(pad) != c.batch:
        raise UsageError(f"--pad gives {len(pad)} value(s) but --batch is {c.batch}: give one number of "
                         f"padding tokens per sequence, e.g. --pad {','.join(['0'] * c.batch)}")
    for p in pad:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < c.k_len:
            side = "--kv-len" if c.cross else "--seq-len"
            raise UsageError(f"--pad value {p!r} must be between 0 and {c.k_len - 1} ({side} {c.k_len} "
                             "minus one): every sequence keeps at least one real token")


def _check_dropout(c: AttentionConfig) -> None:
    if isinstance(c.dropout, bool) or not isinstance(c.dropout, (int, float)) or not 0 <= c.dropout < 1:
        raise UsageError(f"--dropout must be a probability in [0, 1), got {c.dropout!r}")


def _check_impl(c: AttentionConfig) -> None:
    if c.impl == "fused-qkv" and (c.cross or c.grouped):
        what = "--kv-len (keys from another sequence)" if c.cross else "--kv-heads (k and v narrower than q)"
        raise UsageError(f"--impl fused-qkv projects q, k and v from one input with one D x 3D linear; "
                         f"it cannot do {what}. Use --impl manual, einops or sdpa")
    if c.impl == "torch" and c.grouped:
        raise UsageError("--impl torch (nn.MultiheadAttention) has no grouped-query attention; "
                         "use --impl manual, einops or sdpa with --kv-heads")


def _check_broken(c: AttentionConfig) -> None:
    if c.broken is None:
        return
    if c.broken in CATALOGUE and c.broken not in BREAKS:
        raise UsageError(f"--break {c.broken!r} is a broken function in the catalogue, not a whole-model "
                         f"break; --break runs one of {', '.join(BREAKS)} (see: shapetrace run --break list)")
    if c.broken not in BREAKS:
        raise UsageError(f"--break {c.broken!r} is not in the catalogue: {', '.join(BREAKS)} "
                         "(see: shapetrace run --break list)")
    brk = BREAKS[c.broken]
    if c.impl not in ("manual", brk.impl) or c.cross or c.grouped:
        raise UsageError("--break variants are small changes to the reference (--impl manual) "
                         "self-attention; drop --impl, --kv-len and --kv-heads")
    shape = "decode" if c.decode is not None else "image" if c.image is not None else "attention"
    if brk.shape != "attention" and shape not in ("attention", brk.shape):
        raise UsageError(f"--break {c.broken} is a bug of --{brk.shape} runs, not of --{shape} runs")
    if brk.shape == "attention" and shape != "attention":
        raise UsageError(f"--break {c.broken} is a bug of the plain forward pass; drop --{shape} "
                         f"(see: shapetrace run --break list)")
