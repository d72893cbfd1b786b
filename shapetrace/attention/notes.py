"""Header lines and plain-English notes for variant runs (plain strings, no Rich).

Every number comes from the config or from the recorded events (torch's shapes,
strides and byte counts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_bytes, fmt_shape
from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.attention.config import AttentionConfig
    from shapetrace.engine.events import Event


def title(c: AttentionConfig) -> str:
    kind = "cross-attention" if c.cross else "self-attention"
    heads = ("multi-query" if c.h_kv == 1 else "grouped-query") if c.grouped else "multi-head"
    words = (["causal"] if c.causal else []) + ([f"padding-masked ({c.pad_side})"] if c.mask == "padding" else [])
    text = " ".join(words + [heads, kind])
    if c.decode:
        text = f"{heads} attention, decoding with a KV cache"
    elif c.image:
        text = f"{heads} attention over image patches"
    if c.broken:
        return f"BROKEN: {c.broken} · {text}"
    return f"{text} · impl {c.impl}"


def header(c: AttentionConfig) -> list[str]:
    """The run header: sizes, d_k and the parameter count worked out."""
    D, H = c.d_model, c.heads
    sizes = f"B={c.batch} " + (f"T_q={c.seq_len} T_k={c.k_len}" if c.cross else f"T={c.seq_len}")
    if c.image:
        sizes = f"B={c.batch} C={c.in_channels} SIZE={c.image} P={c.patch}"
    sizes += f" D={D} H={H}" + (f" H_kv={c.h_kv}" if c.grouped else "")
    if c.decode:
        sizes += f" steps={c.decode}"
    lines = [f"shapetrace · {title(c)} · {sizes}"]
    if c.image:
        g = c.grid
        lines.append(f"patches: SIZE / P = {c.image} / {c.patch} = {g} per side, N = {g}·{g} = {g * g}, "
                     f"tokens 1+N = {1 + g * g} (a class token in front)")
    if c.decode:
        lines.append(f"a causal prefill of T = {c.seq_len} tokens, then {c.decode} decode step"
                     f"{'s' if c.decode != 1 else ''} of one token each: the cache grows T -> T+{c.decode}")
    if c.grouped:
        D_kv = c.h_kv * c.d_k
        lines.append(f"d_k = D / H = {D} / {H} = {c.d_k} · n_rep = H / H_kv = {H} / {c.h_kv} = {H // c.h_kv} · "
                     f"D_kv = H_kv·d_k = {D_kv} · parameters 2·D² + 2·D·D_kv + 2·D + 2·D_kv = {c.param_count:,}")
    else:
        lines.append(f"d_k = D / H = {D} / {H} = {c.d_k} · parameters 4·D² + 4·D = {c.param_count:,} "
                     "(q, k, v and output projections with biases)")
    if c.mask == "padding":
        lines.append(f"padding tokens per sequence ({c.pad_side}): {', '.join(map(str, c.pad))}")
    if c.dropout:
        lines.append(f"attention dropout p={c.dropout:g}, {'train' if c.train else 'eval'} mode")
    return lines


def notes_for(c: AttentionConfig, events: list[Event], model, device: str) -> list[str]:
    """Notes on what this variant showed: GQA memory, dropout, torch's path, sdpa, masks."""
    notes = []
    for note in (_gqa(c, events), _dropout(c, events), _torch_path(c, events, model, device),
                 _sdpa(c, events), _safe(c, events)):
        if note:
            notes.append(note)
    return notes


def _first(events, family: Family, after: int = -1) -> Event | None:
    return next((e for e in events if e.spec.family is family and e.index > after), None)


def _gqa(c: AttentionConfig, events) -> str | None:
    if not c.grouped:
        return None
    D, D_kv = c.d_model, c.h_kv * c.d_k
    saved = 2 * (D * D + D) - 2 * (D * D_kv + D_kv)
    text = (f"grouped-query: k and v are projected to D_kv = H_kv·d_k = {c.h_kv}·{c.d_k} = {D_kv} instead of "
            f"D = {D}: the two KV weights are {D}×{D_kv} instead of {D}×{D}, {saved:,} fewer parameters "
            f"({fmt_bytes(4 * saved)} in float32), and a KV cache holds {c.heads // c.h_kv}x fewer values per token.")
    ex = _first(events, Family.EXPAND)
    if ex is not None and ex.output is not None:
        o = ex.output
        zero = [o.dims[i] or str(i) for i, s in enumerate(o.stride) if s == 0 and o.shape[i] > 1]
        text += (f" expand #{ex.index} gives {fmt_shape(o)} with strides {tuple(o.stride)}: stride 0 on "
                 f"{', '.join(zero)} means each key/value head is read {c.heads // c.h_kv} times from the same memory.")
        rs = next((e for e in events if e.index > ex.index and e.spec.family is Family.RESHAPE), None)
        if rs is not None:
            if rs.view:
                text += (f" reshape #{rs.index} to {fmt_shape(rs.output)} is still a view, strides "
                         f"{tuple(rs.output.stride)}: with one key/value head the stride-0 axis simply becomes H.")
            else:
                text += (f" reshape #{rs.index} to {fmt_shape(rs.output)} cannot keep stride 0 while merging "
                         f"H_kv and n_rep, so it copies {fmt_bytes(rs.copy_bytes)}: memory grows only here.")
    return text


def _dropout(c: AttentionConfig, events) -> str | None:
    if not c.dropout:
        return None
    e = _first(events, Family.DROPOUT)
    if e is None:
        if c.impl in ("sdpa", "torch"):
            return (f"dropout p={c.dropout:g} happens inside the fused {c.impl} call, on the weights, "
                    "after softmax; it does not change any shape.")
        return None
    i, o = e.inputs[0], e.output
    mode = ("train mode: about a fraction p of the weights are zeroed and the rest scaled by 1/(1-p)"
            if c.train else "eval mode: dropout is the identity (add --train to see it act)")
    return (f"attention dropout sits at #{e.index}, on the softmax weights before they multiply v: "
            f"{fmt_shape(i)} in, {fmt_shape(o)} out, the same shape; {mode}.")


def _torch_path(c: AttentionConfig, events, model, device: str) -> str | None:
    if c.impl != "torch" or c.broken:
        return None
    per_head = (c.batch, c.heads, c.seq_len, c.k_len)
    weights = next((e.output for e in reversed(events) if e.output is not None and e.output.shape == per_head), None)
    text = ("nn.MultiheadAttention ran its Python path, each of its ops recorded above: the packed "
            "in-projection, the split into B·H heads, the scores, the softmax and the out-projection. "
            "Its fused fast path is never taken here: need_weights=True and an active TorchFunctionMode "
            "(this tracer) both switch it off.")
    if weights is not None:
        avg = _averaged_shape(model, c, device)
        text += (f" Weights returned per head: {list(weights.shape)} (average_attn_weights=False, as traced); "
                 f"with the default average_attn_weights=True it returns the head average {avg}.")
    return text


def _averaged_shape(model, c: AttentionConfig, device: str) -> list[int]:
    """Ask torch for the default (head-averaged) weights' shape (untraced)."""
    import torch

    with torch.no_grad(), torch.device(device):
        x = torch.zeros(c.batch, c.seq_len, c.d_model)
        mem = torch.zeros(c.batch, c.k_len, c.d_model)
        _y, w = model.mha(x, mem, mem, need_weights=True)
    return list(w.shape)


def _sdpa(c: AttentionConfig, events) -> str | None:
    e = _first(events, Family.FUSED_ATTENTION)
    if e is None or c.impl != "sdpa":
        return None
    ins = ", ".join(fmt_shape(t) for t in e.inputs)
    return (f"F.scaled_dot_product_attention (#{e.index}) takes q, k, v{' and the mask' if len(e.inputs) > 3 else ''}: "
            f"{ins}; returns {fmt_shape(e.output)}, strides {tuple(e.output.stride)}. The scores and "
            "weights [B, H, T_q, T_k] never reach Python, so there is no heat map." + _sdpa_layout(e, events))


def _sdpa_layout(e: Event, events) -> str:
    """The merge after sdpa: is .contiguous() a no-op because of the kernel's output layout?"""
    c = _first(events, Family.CONTIGUOUS, e.index)
    if c is None or not c.noop or e.output is None or e.output.contiguous:
        return ""
    return (f" Its output is not contiguous: the kernel wrote it in [B, T, H, d_k] order, so after the "
            f"transpose back .contiguous() (#{c.index}) copies nothing.")


def _safe(c: AttentionConfig, events) -> str | None:
    if not c.safe_softmax or c.impl in ("sdpa", "torch"):
        return None
    fills = [e for e in events if e.spec.family is Family.MASK_FILL and e.function.endswith("softmax")]
    where = f" (#{fills[0].index})" if fills else ""
    return ("safe softmax: rows whose keys are all masked are set to 0 after softmax" + where +
            " instead of 0/0 = NaN; those queries then output only the bias of the output projection.")
