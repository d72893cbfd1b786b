"""The contracts of the attention kernels and of broadcasting, checked from each call's recorded
operands (part of ``diagnose.RULES``).

``F.scaled_dot_product_attention`` reads its operands by position: ``q [..., L, E]``,
``k [..., S, E]``, ``v [..., S, Ev]``, a mask broadcast to ``[..., L, S]``; everything before the
last two axes is batch. Torch checks only that the sizes fit, so a layout, a mask or a flag that
means something else runs without a word. Each rule here decides from the axis names the engine
propagated, from the recorded parameters and, for boolean masks, from the values read at call time
(on the CPU only: :func:`shapetrace.engine.op_args.mask_facts`); where those do not prove a bug, it
says nothing.

Torch's behaviour each rule relies on is checked in tests/engine/test_contracts.py.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from shapetrace.engine.axes import COPIES, Axis, coalesce, indexed_join, top_level_terms
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.namer import Namer, fold_roles
from shapetrace.engine.ops import Family
from shapetrace.engine.rules.causes import made_at

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.events import Event, TensorInfo

#: the name of the fused kernel in messages
SDPA = "scaled_dot_product_attention"


def _sdpa_calls(analysis: Analysis) -> list[Event]:
    return [e for e in analysis.events_of(Family.FUSED_ATTENTION) if len(e.inputs) >= 3]


def _shown(t: TensorInfo) -> str:
    return fmt_named(t.dims, t.shape)


# ---------------------------------------------------------------------------
# SDPA: [B, T, H, d] where [B, H, T, d] is due
# ---------------------------------------------------------------------------

def sdpa_layout(analysis: Analysis) -> list[Diagnostic]:
    """q, k or v handed to SDPA with its heads on axis -2 and its tokens on axis -3: the kernel
    attends over the heads of each token. Decided from names only (never sizes: T may equal H)."""
    out = []
    for e in _sdpa_calls(analysis):
        wrong = [(which, t) for which, t in zip("qkv", e.inputs[:3]) if _heads_before_features(analysis.namer, t)]
        if not wrong:
            continue
        which, t = wrong[0]
        tokens, heads = t.dims[-3], t.dims[-2]
        names = [w for w, _ in wrong]
        operands = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        out.append(Kind.SDPA_LAYOUT.found(e.index, (
            f"{SDPA} #{e.index} reads {operands} as [..., L, E] (tokens on axis -2, all axes before them "
            f"batch), but {which} is {_shown(t)}: axis -2 holds the heads ({heads}) and the tokens ({tokens}) "
            f"sit on axis -3, a batch axis to the kernel. Each token attends over its own {t.shape[-2]} heads "
            "instead of over the other tokens; torch only checks that the sizes fit."), (
            "Move the heads ahead of the tokens before the call: q, k, v = (x.transpose(1, 2) for x in "
            "(q, k, v)) gives [B, H, T, d_k]; transpose the output back with .transpose(1, 2) before merging "
            "the heads.")))
    return out


def told_apart(la: str | None, lb: str | None, analysis: Analysis) -> bool:
    """Are these two names provably two different axes? Two declared names (``d_k``, ``T``, ``D_kv``), or
    two joins of the same declared parts in another order (``T+S`` against ``S+T``: the same tokens in
    other places); anything derived (a slice, a product, a join beside a plain name) is not told apart."""
    def plain(label: str | None) -> bool:
        return bool(label) and (label in analysis.dims or label in analysis.namer.decompositions)
    if la == lb or not la or not lb:
        return False
    if plain(la) and plain(lb):
        return True
    if part_beside_slice(la, lb, analysis.namer) or part_beside_slice(lb, la, analysis.namer):
        return True
    ta, tb = top_level_terms(la), top_level_terms(lb)
    if len(ta) > 1 and sorted(ta) == sorted(tb) and all(t.isdigit() or plain(t) for t in ta):
        return True
    return reordered_factors(la, lb, analysis.dims, analysis.namer) is not None


def reordered_factors(la: str, lb: str, dims: dict[str, int], namer: Namer) -> tuple[tuple[str, ...], ...] | None:
    """The two orders, where ``la`` and ``lb`` flatten the same declared axes in another order: ``Wp*Hp``
    against ``N`` (the grid flattened row by row, ``Hp·Wp``) or ``Hp*Wp``. The same elements then sit in other
    places, whatever the sizes (a square grid included); a factor of size 1 moves nothing, so it is left out."""
    def orders(label: str) -> list[tuple[str, ...]]:
        parts = tuple(label.split("*"))
        if len(parts) > 1:
            return [parts] if all(p in dims for p in parts) else []
        return [p for p in namer.decompositions.get(label, ()) if all(q in dims for q in p)]

    def moving(parts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in parts if dims[p] != 1)

    return next(((moving(a), moving(b)) for a in orders(la) for b in orders(lb)
                 if sorted(moving(a)) == sorted(moving(b)) and len(moving(a)) > 1 and moving(a) != moving(b)), None)


def part_beside_slice(cut: str, part: str, namer: Namer) -> tuple[int, int] | None:
    """``part``'s bounds in the join that ``cut`` slices off them: ``(T+1)[1:7]`` (keys 1 to 5 and gpt-oss's
    sink column) against ``T`` (keys 0 to 5) is ``(0, 6)``, other elements in the same places. Every part of
    the join has a known size and ``part`` is one of them, once; a slice at a part's bounds is already named
    that part (:func:`..axes.sliced`), so what is left is a cut across parts. None otherwise."""
    join, bounds = indexed_join(cut), re.fullmatch(r".*\[(\d+):(\d+)\]", cut)
    if join is None or bounds is None:
        return None
    terms = top_level_terms(join)
    sizes = [int(t) if t.isdigit() else namer.size_of(t) for t in terms]
    if terms.count(part) != 1 or None in sizes:
        return None
    start = sum(sizes[:terms.index(part)])
    found = (start, start + sizes[terms.index(part)])
    return found if found != (int(bounds.group(1)), int(bounds.group(2))) else None


def cut_across(la: str, lb: str, namer: Namer, dims: dict[str, int]) -> str:
    """Where one label is a slice of a join cut across its parts and the other one of those parts: which;
    where the two flatten the same axes in another order: which orders."""
    orders = reordered_factors(la, lb, dims, namer)
    if orders is not None:
        first, second = ("·".join(o) for o in orders)
        return (f": both hold the same {' and '.join(sorted(orders[0]))} positions, flattened {first} in one and "
                f"{second} in the other, so entry i of one is another position than entry i of the other")
    for cut, part in ((la, lb), (lb, la)):
        bounds = part_beside_slice(cut, part, namer)
        if bounds is not None:
            return (f": {cut} is cut across the parts of {indexed_join(cut)}, so its entries are not {part}'s "
                    f"(positions {bounds[0]} to {bounds[1] - 1} of the join)")
    return ""


def contraction_fix(la: str, lb: str, namer: Namer, dims: dict[str, int]) -> str:
    """The fix of a product summing over two different axes: one order of flattening where they flatten the
    same axes in two, the part's bounds where one is a cut across parts, else the transpose a q @ k forgot."""
    orders = reordered_factors(la, lb, dims, namer)
    if orders is not None:
        return (f"Flatten both operands from the same axis order ({' then '.join(orders[0])}): drop the transpose "
                "or permute before the reshape of the one flattened the other way.")
    for cut, part in ((la, lb), (lb, la)):
        bounds = part_beside_slice(cut, part, namer)
        if bounds is not None:
            return f"Take {part} at its bounds in {indexed_join(cut)}: [..., {bounds[0]}:{bounds[1]}]."
    return "If this is q @ k, transpose k first: q @ k.transpose(-2, -1)."


def sdpa_keys_values_apart(analysis: Analysis) -> list[Diagnostic]:
    """``F.scaled_dot_product_attention`` weighs value row ``j`` by key ``j``: the tokens axis of ``k`` and of
    ``v`` must be one axis (SD3's joint attention with the keys joined ``T+S`` and the values ``S+T``)."""
    out = []
    for e in _sdpa_calls(analysis):
        k, v = e.inputs[1], e.inputs[2]
        lk, lv = (k.dims[-2] if len(k.dims) > 1 else None), (v.dims[-2] if len(v.dims) > 1 else None)
        if told_apart(lk, lv, analysis):
            out.append(Kind.CONTRACTS_DIFFERENT_AXES.found(e.index, (
                f"{SDPA} #{e.index} weighs the values {_shown(v)} by the keys {_shown(k)}: value row j goes with "
                f"key j, but the keys' axis -2 is {lk} and the values' is {lv}, other tokens in the same "
                "places, so each key is paired with another token's value."),
                "Build the keys and the values the same way: join both in one order (torch.cat([x, y], dim=2) "
                "for both)."))
    return out


def sdpa_over_batch(analysis: Analysis) -> list[Diagnostic]:
    """q or k handed to SDPA with the batch on axis -2 (nn.MultiheadAttention with batch_first=False
    fed [B, T, D]: it reads axis 0 as the sequence): each token attends over the batch entries. So does a
    key axis that holds the batch folded in with other entries (``B·N``: diffusers issue #9813's image
    embeddings repeated once per prompt again and viewed ``(batch_size, -1, heads, head_dim)``): each query
    attends over the tokens of every batch entry in that fold, where SDPA is given no mask (sequences packed
    into one row, ``[1, H, B·T, d_k]``, are kept apart by a block-diagonal ``attn_mask``)."""
    out = []
    for e in _sdpa_calls(analysis):
        wrong = [(which, t) for which, t in zip("qk", e.inputs[:2])
                 if len(t.dims) >= 2 and analysis.namer.plain_role(t.dims[-2]) == "batch"]
        folded = _keys_fold_the_batch(analysis.namer, e.inputs[1]) if len(e.inputs) <= 3 else None
        if not wrong and folded:   # (with a mask, packed sequences kept apart by it: the contracts measure that)
            k = e.inputs[1]
            out.append(Kind.ATTENDS_OVER_BATCH.found(e.index, (
                f"{SDPA} #{e.index} reads k as [..., S, E], but k is {_shown(k)}: axis -2 holds the batch folded "
                f"in with other entries ({folded}), so each query attends over the keys of several batch entries "
                "at once; torch only checks that the sizes fit."), (
                "Give the keys one row per batch entry before the view: build them [B, S, D] (one copy per "
                "batch entry, not B copies of the whole batch), then view(B, S, H, d_k).transpose(1, 2).")))
            continue
        if not wrong:
            continue
        which, t = wrong[0]
        tokens = next((lab for lab in t.dims[:-2] if analysis.namer.plain_role(lab) == "tokens"), None)
        where = f" and the tokens ({tokens}) sit in a batch axis" if tokens else ""
        out.append(Kind.ATTENDS_OVER_BATCH.found(e.index, (
            f"{SDPA} #{e.index} reads {which} as [..., L, E], but {which} is {_shown(t)}: axis -2 holds the "
            f"batch ({t.dims[-2]}){where}. Each query attends over the other sentences of the batch instead "
            "of over the other tokens of its own; torch only checks that the sizes fit."), (
            "If this is nn.MultiheadAttention fed [B, T, D], create it with batch_first=True (or pass "
            "x.transpose(0, 1)); otherwise put the tokens on axis -2 of q, k and v.")))
    return out


def _keys_fold_the_batch(namer: Namer, t: TensorInfo) -> str | None:
    """The label of ``t``'s axis -2 where it is a fold of several pieces one of which is a batch axis of more
    than one entry (``B·N``), else None. Read on the pieces the axis is made of, never on sizes."""
    if len(t.dims) < 2 or len(t.axes) != len(t.dims) or not t.dims[-2]:
        return None
    pieces = coalesce(t.axes[-2].atoms)
    if len(pieces) < 2 or not any(p.size > 1 and namer.role(p.root) == "batch" for p in pieces):
        return None
    return t.dims[-2].replace("*", "·")


def _heads_before_features(namer: Namer, t: TensorInfo) -> bool:
    if len(t.dims) < 3:
        return False
    return namer.plain_role(t.dims[-2]) == "heads" and namer.plain_role(t.dims[-3]) == "tokens"


# ---------------------------------------------------------------------------
# SDPA: is_causal with L != S
# ---------------------------------------------------------------------------

def causal_alignment(analysis: Analysis) -> list[Diagnostic]:
    """``is_causal=True`` with a different number of queries and keys: torch aligns its causal mask
    top-left (``ones(L, S).tril()``), so query i sees keys 0..i, however many keys precede it."""
    out = []
    for e in _sdpa_calls(analysis):
        q, k = e.inputs[0], e.inputs[1]
        if not e.params.get("is_causal") or len(q.shape) < 2 or len(k.shape) < 2 or e.error:
            continue
        n_q, n_k = q.shape[-2], k.shape[-2]
        if n_q == n_k:
            continue
        seen = _causal_seen(n_q, n_k)
        fix = ("At a decode step the one new query may see every cached key: call it without a mask "
               "(is_causal=False)." if n_q == 1 else
               f"Pass a mask aligned bottom-right instead: attn_mask=torch.ones({n_q}, {n_k}, "
               f"dtype=torch.bool).tril(diagonal={n_k - n_q}) (query i then sees keys 0..{n_k - n_q}+i).")
        out.append(Kind.CAUSAL_MASK_MISALIGNED.found(e.index, (
            f"{SDPA} #{e.index} is called with is_causal=True on {n_q} "
            f"quer{'y' if n_q == 1 else 'ies'} {_shown(q)} and {n_k} keys {_shown(k)}: torch builds the "
            f"causal mask as ones({n_q}, {n_k}).tril(), aligned top-left, so {seen}. With a cache, the "
            "new queries are the last positions and should see every key up to their own."), fix))
    return out


def _causal_seen(n_q: int, n_k: int) -> str:
    """What each query sees under torch's top-left causal mask ``ones(n_q, n_k).tril()``."""
    if n_q == 1:
        return "the one query sees key 0 only"
    if n_q < n_k:
        return f"query i sees keys 0..i only, so the last query sees {n_q} of the {n_k} keys"
    return (f"queries 0..{n_k - 1} see keys 0..i and queries {n_k}..{n_q - 1} see all {n_k} keys")


# ---------------------------------------------------------------------------
# SDPA: a boolean mask with nn.MultiheadAttention's polarity (True = masked)
# ---------------------------------------------------------------------------

def mask_polarity(analysis: Analysis) -> list[Diagnostic]:
    """A boolean SDPA mask whose values prove that it hides what it should show: the strict upper
    triangle (nn.MultiheadAttention's causal mask, True = masked), or a key mask that leaves a whole
    sequence with no key. Masks that were not read (on a device, too large) get a note."""
    out = []
    for e in _sdpa_calls(analysis):
        read = e.params.get("mask_read")
        if read is None or e.error:
            continue
        if read != "read":
            out.append(Kind.MASK_POLARITY_UNCHECKED.found(e.index, (
                f"the boolean mask of {SDPA} #{e.index} was {read}, so whether True means "
                "\"attend\" there (SDPA's convention) was not checked.")))
            continue
        found = _polarity_problem(e)
        if found:
            out.append(Kind.MASK_POLARITY.found(e.index, found, (
                "SDPA's boolean attn_mask means True = attend; nn.MultiheadAttention's key_padding_mask "
                "and attn_mask mean True = masked. Invert a mask built for the latter: attn_mask=~mask "
                "(a causal one is torch.ones(L, S, dtype=torch.bool).tril()).")))
    return out


def _polarity_problem(e: Event) -> str:
    mask = e.inputs[3] if len(e.inputs) > 3 else None
    shape = f" {_shown(mask)}" if mask is not None else ""
    if e.params.get("mask_pattern") == "future":
        return (f"{SDPA} #{e.index} gets the boolean mask{shape} True strictly above the diagonal: SDPA "
                "reads True as \"attend\", so each query attends only to later keys, never to itself or "
                "the past, and the last query sees no key at all (torch returns zeros for it). That is "
                "the causal mask in nn.MultiheadAttention's convention, where True means masked.")
    blind = e.params.get("mask_blind_rows", 0)
    if blind and mask is not None and (len(mask.shape) < 2 or mask.shape[-2] == 1):
        at = e.params.get("mask_blind_at") or []
        where = f" (mask index {tuple(at)})" if at else ""
        return (f"{SDPA} #{e.index} gets a boolean key mask{shape} with {blind} row"
                f"{'s' if blind != 1 else ''} of no True entry{where}: SDPA reads True as \"attend\", so "
                "every query of that sequence attends to no key and its output is zeros. A padding mask "
                "in nn.MultiheadAttention's convention (True = padding) looks like this: the longest "
                "sequence has no padding, so its row is all False.")
    return ""


# ---------------------------------------------------------------------------
# SDPA: a float mask of 0s and 1s, which SDPA adds to the scores
# ---------------------------------------------------------------------------

def float_mask_as_bias(analysis: Analysis) -> list[Diagnostic]:
    """A float ``attn_mask`` holding only 0s and 1s: SDPA adds a float mask to the scores, so it hides
    nothing (a mask written to multiply by, ``torch.tril(torch.ones(T, T))``, handed where it is added)."""
    out = []
    for e in _sdpa_calls(analysis):
        if e.error or not e.params.get("float_mask_binary"):
            continue
        mask = e.inputs[3] if len(e.inputs) > 3 else None
        shape = f" {_shown(mask)}" if mask is not None else ""
        causal = " (1 on the diagonal and below: a causal mask)" if e.params.get("mask_pattern") == "causal" else ""
        out.append(Kind.FLOAT_MASK_AS_BIAS.found(e.index, (
            f"{SDPA} #{e.index} gets a float attn_mask{shape} holding only 0s and 1s{causal}. SDPA adds a "
            "float mask to the scores before the softmax, so the 1s raise the scores they mark by one and "
            "the 0s change nothing: no key is hidden, and each query still attends to every key."), (
            "Pass a boolean mask, where True means attend: attn_mask=mask.bool() (for a causal mask, "
            "is_causal=True does the same); or an additive one, 0 where a key is seen and -inf where it is "
            "hidden: torch.zeros_like(mask).masked_fill(mask == 0, float('-inf')).")))
    return out


# ---------------------------------------------------------------------------
# layer_norm / rms_norm over an axis of tokens
# ---------------------------------------------------------------------------

def norm_over_tokens(analysis: Analysis) -> list[Diagnostic]:
    """``nn.LayerNorm(D)`` (or RMSNorm) normalises the last axes, which its weight says are features;
    on a channel-first map (``[B, D, T]`` from a Conv1d, ``[B, C, H, W]``) whose last axis has D's size
    by chance, torch runs it over the tokens: each feature is normalised across positions."""
    out = []
    namer = analysis.namer
    for e in analysis.events_of(Family.NORMALISE):
        count = e.params.get("normalised")
        if e.error or not e.inputs or not isinstance(count, int) or count < 1:
            continue
        x = e.inputs[0]
        over = [label for label in x.dims[-count:] if label and namer.role(label.lstrip("!")) in ("tokens", "batch")]
        if not over:
            continue
        out.append(Kind.NORM_OVER_TOKENS.found(e.index, (
            f"{e.op} #{e.index} normalises {_shown(x)} over its last axis ({over[0]}), which holds "
            f"{'tokens' if namer.role(over[0].lstrip('!')) == 'tokens' else 'batch entries'}, not features: "
            "its size matches the norm's width, so torch runs it, but each feature is normalised across "
            "positions instead of each position across its features."), (
            "Put the features last first: x.transpose(1, 2) for a [B, D, T] map from a convolution, "
            "x.permute(0, 2, 3, 1) for [B, C, H, W]; then normalise, and move them back if needed.")))
    return out


# ---------------------------------------------------------------------------
# SDPA: grouped-query attention
# ---------------------------------------------------------------------------

def gqa_heads(analysis: Analysis) -> list[Diagnostic]:
    """k/v with fewer heads than q: torch raises unless ``enable_gqa=True`` (and H divides by H_kv);
    with as many heads as q, ``enable_gqa=True`` has nothing to share (a note)."""
    out = []
    for e in _sdpa_calls(analysis):
        q, k = e.inputs[0], e.inputs[1]
        if len(q.shape) < 3 or len(k.shape) < 3:
            continue
        h_q, h_kv = q.shape[-3], k.shape[-3]
        gqa = bool(e.params.get("enable_gqa"))
        if e.error and h_q != h_kv and h_kv != 1:
            out.append(_gqa_failure(e, q, k, gqa))
        elif not e.error and gqa and h_q == h_kv and h_q > 1 and _repeated_heads(analysis, k):
            out.append(Kind.GQA_HEADS_ALREADY_REPEATED.found(e.index, (
                f"{SDPA} #{e.index} is called with enable_gqa=True, but k {_shown(k)} already has as many "
                f"heads ({h_kv}) as q {_shown(q)}: there is nothing to share. If k and v were repeated from "
                "fewer key/value heads (repeat_interleave, or expand + reshape as Llama's repeat_kv does), "
                "that copy is what enable_gqa saves."), (
                "Pass the unrepeated k and v [B, H_kv, S, d_k] with enable_gqa=True.")))
    return out


def _repeated_heads(analysis: Analysis, k: TensorInfo) -> bool:
    """Were k's heads proven repeated from fewer key/value heads (H_kv declared below H, and k's head
    axis named H, which only a repeat makes of H_kv heads)? A model with as many key/value heads as
    query heads passes enable_gqa=True harmlessly (transformers does): no note then."""
    h_kv = analysis.dims.get("H_kv")
    return bool(h_kv) and h_kv < analysis.dims.get("H", 0) and len(k.dims) >= 3 and k.dims[-3] == "H"


def gqa_head_order(analysis: Analysis) -> list[Diagnostic]:
    """k or v with its key/value heads tiled (``k.repeat(1, n_rep, 1, 1)``: head j is key/value head
    j mod H_kv) meeting queries whose head h reads key/value head h // n_rep (``H`` = H_kv · n_rep, the
    order repeat_interleave and Llama's repeat_kv make). Read from the axes' pieces, never from sizes:
    the tiled axis holds copies outside H_kv. Reported at the op that tiled them (the bug is there),
    naming the product that shows it."""
    out = []
    for e in analysis.events_of(Family.FUSED_ATTENTION, Family.PRODUCT):
        if e.error or len(e.inputs) < 2:
            continue
        q = e.inputs[0]
        if len(q.shape) < 3 or q.dims[-3] != "H" or not analysis.dims.get("H_kv"):
            continue
        tiled = next((i for i, t in enumerate(e.inputs[1:3], 1)
                      if len(t.axes) >= 3 and _tiled_heads(analysis.namer, t.axes[-3])), None)
        if tiled is not None:
            out.append(_head_order_diagnostic(analysis, e, tiled, analysis.dims["H_kv"]))
    return out


def _tiled_heads(namer: Namer, axis: Axis) -> bool:
    """An axis made of copies (outer: unnamed, or ``n_rep``, the copies of each key/value head that an
    ``expand`` beside ``H_kv`` makes) of the key/value heads (inner), each of more than one entry: Falcon-40B's
    broadcast groups flattened ``(n_rep, H_kv)`` are tiled as ``repeat`` tiles them."""
    atoms = [a for a in axis.atoms if a.size > 1]
    return len(atoms) == 2 and (atoms[0].root == COPIES or namer.label(Axis((atoms[0],))) == "n_rep") \
        and namer.label(Axis((atoms[1],))) == "H_kv"


def _head_order_diagnostic(analysis: Analysis, e: Event, tiled: int, h_kv: int) -> Diagnostic:
    q, k = e.inputs[0], e.inputs[tiled]
    h = q.shape[-3]
    n_rep = h // h_kv
    seen = (f"{e.op} #{e.index} pairs them with q {_shown(q)}, whose head h is meant to read key/value head "
            f"h // {n_rep}: query head 1 meets key/value head {1 % h_kv} instead of {1 // n_rep}. The shapes agree, "
            "so torch cannot complain.")
    made = made_at(analysis, e, tiled, len(k.shape) - 3)
    axis = len(k.shape) - 3   # (in k: the product's operand)
    if made is None:
        where, what = e.index, f"{e.op} #{e.index} reads {_shown(k)}"
    else:
        tiler = analysis.events[made]
        where, what = made, f"{tiler.op} #{made} makes {_shown(tiler.outputs[0])}"
        # (where the tiler lays the heads: gemma_pytorch's cache is [B, L, H_kv, d_k], its heads on axis 2)
        axis = next((j for j, a in enumerate(tiler.outputs[0].axes) if a.atoms == k.axes[-3].atoms), axis)
    return Kind.GQA_HEAD_ORDER.found(where, (
        f"{what}: its {h} heads are the {h_kv} key/value heads tiled {n_rep} times (head j is key/value head "
        f"j mod {h_kv}). {seen}"), (
        f"Repeat each key/value head in place: .repeat_interleave(n_rep, dim={axis}), or "
        "[:, :, None].expand(B, H_kv, n_rep, T, d_k).reshape(B, H, T, d_k) as Llama's repeat_kv does; with SDPA, "
        "pass the unrepeated k and v and enable_gqa=True."),
        blame=((-1, axis),) if made is not None else ((tiled, axis),),
        also=(e.index,) if made is not None else ())


def _gqa_failure(e: Event, q: TensorInfo, k: TensorInfo, gqa: bool) -> Diagnostic:
    h_q, h_kv = q.shape[-3], k.shape[-3]
    if gqa:
        why = (f"with enable_gqa=True each key/value head serves H / H_kv query heads, so H_kv must divide H; "
               f"{h_kv} does not divide {h_q}.")
        fix = f"Give k and v a number of heads that divides {h_q}, or check which axis holds the heads."
    else:
        why = (f"without enable_gqa, torch lines up the batch axes of q and k by broadcasting, and axis -3 "
               f"({h_q} against {h_kv}) is neither equal nor 1.")
        fix = (f"For grouped-query attention pass enable_gqa=True (each of the {h_kv} key/value heads serves "
               f"{h_q // h_kv} query heads)" if h_q % h_kv == 0 else
               "Give k and v as many heads as q, or a number that divides it, with enable_gqa=True")
        fix += "; repeating k and v with repeat_interleave works too, at the cost of a copy."
    return Kind.GQA_HEADS_MISMATCH.found(e.index, (
        f"{SDPA} #{e.index} raised: q {_shown(q)} has {h_q} heads and k {_shown(k)} has {h_kv}; {why}"), fix)


# ---------------------------------------------------------------------------
# softmax without dim
# ---------------------------------------------------------------------------

def softmax_implicit_dim(analysis: Analysis) -> list[Diagnostic]:
    """``F.softmax(x)`` without ``dim``: torch's legacy rule picks axis 0 for 0-, 1- and 3-D input
    and axis 1 otherwise (``_get_softmax_dim``), never "the last axis"."""
    out = []
    for e in analysis.events_of(Family.SOFTMAX):
        if not e.params.get("implicit_dim") or not e.inputs:
            continue
        t = e.inputs[0]
        dim = e.params["dim"]
        roles = [a.role for a in t.axes]
        picked = (f"{e.op} #{e.index} is called without dim on {_shown(t)} ({len(t.shape)}-D): torch's legacy "
                  f"rule then normalises over axis {dim}"
                  f"{f' ({t.dims[dim]})' if dim < len(t.dims) and t.dims[dim] else ''} (axis 0 for 0-, 1- and "
                  "3-D input, axis 1 otherwise)")
        if "key" in roles and roles.index("key") != dim:
            out.append(Kind.SOFTMAX_IMPLICIT_DIM.found(e.index, (
                f"{picked}, not over the keys (axis {roles.index('key') - len(roles)}): each query's weights "
                "do not sum to 1 over the keys."), "Pass the axis: softmax(scores, dim=-1)."))
        elif "key" not in roles and len(t.shape) > 2:
            out.append(Kind.SOFTMAX_IMPLICIT_DIM.found(e.index, (
                f"{picked}. Which axis holds the keys is not known here, so it was not checked."),
                "Pass the axis explicitly (dim=-1 for attention scores).", severity="note"))
    return out


# ---------------------------------------------------------------------------
# broadcasting: axes lined up must mean the same thing
# ---------------------------------------------------------------------------

def broadcast_lineup(analysis: Analysis) -> list[Diagnostic]:
    """An elementwise op (``+``, ``*``, ``masked_fill``, ``where``) whose broadcast lines up two axes
    of different roles with the same size: a ``[B, T, T]`` mask on ``[B, H, T, T]`` scores puts B on H.
    Only names with known, different roles count (never sizes)."""
    out = []
    for e in analysis.events_of(Family.ELEMENTWISE, Family.MASK_FILL):
        if e.error or len(e.inputs) < 2:
            continue
        clash = analysis.namer.broadcast_clash([(t.dims, t.shape) for t in e.inputs])
        if clash:
            out.append(_lineup_diagnostic(e, analysis.namer, *clash))
    return out


def _lineup_diagnostic(e: Event, namer: Namer, j: int, ia: int, ib: int) -> Diagnostic:
    a, b = e.inputs[ia], e.inputs[ib]
    big, small = (a, b) if len(a.shape) >= len(b.shape) else (b, a)
    la, lb = big.dims[-j], small.dims[-j]
    role = {lab: namer.role(lab) or " and ".join(map(str, fold_roles(namer, lab))) for lab in (la, lb)}
    text = (f"{e.op} #{e.index} lines up {_shown(small)} with {_shown(big)} from the right: axis {-j} pairs "
            f"{lb} ({role[lb]}) of the first with {la} ({role[la]}) of the second. Both have "
            f"{big.shape[-j]} entries, so torch broadcasts without complaint, but entry i of {lb} is applied to "
            f"entry i of {la}.")
    where = _insert_point(namer, big, small)
    fix = (f"Give the smaller operand a size-1 axis where the other has {la}: .unsqueeze({where}) "
           f"(x[{', '.join([':'] * where + ['None'])}]) makes {_shown_with_one(small, where)}." if where is not None
           else "Line the axes up by name: insert size-1 axes (unsqueeze) or transpose the smaller operand "
                "so each axis faces the axis it means.")
    return Kind.BROADCAST_MISMATCH.found(e.index, text, fix)


def _insert_point(namer: Namer, big: TensorInfo, small: TensorInfo) -> int | None:
    """Where one size-1 axis inserted into ``small`` lines every named axis up with the same name."""
    if len(small.shape) >= len(big.shape):
        return None
    for p in range(len(small.shape) + 1):
        dims = list(small.dims[:p]) + [None] + list(small.dims[p:])
        shape = list(small.shape[:p]) + [1] + list(small.shape[p:])
        lead = len(big.shape) - len(shape)
        if lead >= 0 and all(s == 1 or (d is not None and d == big.dims[lead + i])
                             for i, (d, s) in enumerate(zip(dims, shape))):
            return p
    return None


def _shown_with_one(t: TensorInfo, p: int) -> str:
    return fmt_named(list(t.dims[:p]) + [None] + list(t.dims[p:]), list(t.shape[:p]) + [1] + list(t.shape[p:]))


CONTRACT_RULES = [sdpa_layout, sdpa_over_batch, sdpa_keys_values_apart, causal_alignment, mask_polarity,
                  float_mask_as_bias, gqa_heads, gqa_head_order, softmax_implicit_dim, norm_over_tokens,
                  broadcast_lineup]
