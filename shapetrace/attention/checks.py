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
    if c.impl != "manual" or c.cross or c.grouped:
        raise UsageError("--break variants are small changes to the reference (--impl manual) "
                         "self-attention; drop --impl, --kv-len and --kv-heads")
