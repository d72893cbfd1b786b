"""The catalogue of classic attention bugs (plain data, no torch).

Each entry says what the mistake is and why it is wrong. An entry comes at one or both of two levels,
and says which:

* a **whole-model break** (``model=True``): ``shapetrace run --break NAME`` runs the reference model
  with it (model code in :mod:`shapetrace.attention.broken`); the entry names the diagnostic the tracer
  must raise for it and any size it needs to run at all. :data:`BREAKS` holds these.
* **broken functions** (``functions``): a broken version of one function each (code in
  :mod:`shapetrace.attention.mutants`), with what it does. The test-writing exercises take their
  mutants from here, by id. Entries with only broken functions are not ``--break`` runs.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from shapetrace.attention.mutants import FILED

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.attention.config import AttentionConfig


@dataclass(frozen=True)
class BrokenFunction:
    """A broken version of one function: its name, what it does, and its self-contained source."""

    function: str
    does: str
    code: str


@dataclass(frozen=True)
class Break:
    """One classic mistake, as a whole-model break, as broken functions, or both."""

    name: str
    summary: str
    why: str
    kinds: tuple[str, ...] = ()
    severity: str = "error"
    forces: dict = field(default_factory=dict)
    #: The size the leak analysis may shrink without changing which token reaches which (see
    #: :func:`leak_config`): ``"d_k"``, or ``"heads"`` where the bug ties d_k to T.
    leak_free: str = "d_k"
    model: bool = True
    functions: tuple[BrokenFunction, ...] = ()
    #: The forward pass it breaks: ``attention`` (the plain one), ``decode`` (``--decode N``, a KV cache)
    #: or ``image`` (``--image SIZE --patch P``, patches and a class token); run with that shape.
    shape: str = "attention"
    #: The implementation it is written in (``--impl``): the reference, or ``sdpa`` for a fused-kernel bug.
    impl: str = "manual"

    def function(self, name: str) -> BrokenFunction | None:
        """This entry's broken version of the function ``name`` (None when it has none)."""
        return next((f for f in self.functions if f.function == name), None)

    def to_dict(self) -> dict:
        return {"name": self.name, "summary": self.summary, "why": self.why, "kinds": list(self.kinds),
                "severity": self.severity, "forces": dict(self.forces), "model": self.model,
                "shape": self.shape, "impl": self.impl,
                "functions": [{"function": f.function, "does": f.does} for f in self.functions]}


_ENTRIES = [
    Break("skip-transpose", "q.view(B, H, T, d_k): heads split without a transpose",
          "view keeps memory order, so each 'head' is a run of d_k features from several tokens "
          "instead of one slice of every token", ("mixed-axis", "attends-over-wrong-axis")),
    Break("reshape-not-transpose", "q.reshape(B, H, T, d_k): reshape where a transpose belongs",
          "reshape keeps the row-major order of the elements just like view (it only copies "
          "where view would fail), so the heads are never moved ahead of the tokens",
          ("mixed-axis", "attends-over-wrong-axis")),
    Break("wrong-transpose", "view(B, T, H, d_k).transpose(0, 1): swaps batch and tokens",
          "the heads stay behind the tokens, so q @ kᵀ compares heads of one token, not tokens",
          ("attends-over-wrong-axis", "batch-mismatch")),
    Break("view-after-transpose", "y.transpose(1, 2).view(B, T, D) without .contiguous()",
          "after the transpose H and d_k are no longer next to each other in memory, so no "
          "strides can merge them: torch raises instead of copying", ("view-incompatible",)),
    Break("merge-without-transpose", "y.reshape(B, T, D) straight from (B, H, T, d_k)",
          "the heads are still in front of the tokens, so each output 'token' is made of pieces "
          "of several tokens of one head", ("mixed-axis", "tokens-merged-with-features")),
    Break("interleaved-heads", "view(B, T, d_k, H): head h takes every H-th feature",
          "consistent within the model, so training learns around it; only pretrained weights "
          "(which assume view(B, T, H, d_k)) give different answers", ("nonstandard-head-split",),
          severity="note"),
    Break("softmax-wrong-dim", "softmax(scores, dim=-2): normalised over the queries",
          "each key's column sums to 1 instead of each query's row, so a query's weights are "
          "not a distribution over the keys", ("softmax-wrong-axis",)),
    Break("mask-wrong-axis", "padding mask as [B, 1, T, 1]: hides query rows instead of key columns",
          "real queries still attend to padding keys, and padded queries get all -inf rows",
          ("mask-wrong-axis",), forces={"mask": "padding"}),
    Break("batch-as-seq", "x.view(T, B, D) to go sequence-first, instead of x.transpose(0, 1)",
          "the view cuts the memory of [B, T, D] into T rows of B 'sequences' made of pieces of "
          "different sequences: the classic batch_first mistake", ("mixed-axis", "attends-over-batch")),
    Break("no-key-transpose", "q @ k instead of q @ k.transpose(-2, -1) (run with T = d_k)",
          "with T = d_k the shapes line up, so torch sums d_k of the queries against T of the "
          "keys without complaint", ("contracts-different-axes",), forces={"seq_len": "d_k"}, leak_free="heads"),
    # -- the decode run (--decode N): a prefill, then one-token steps with a key/value cache --
    Break("cache-wrong-axis", "torch.cat([cache_k, k], dim=1): the new key joins the cache along the heads",
          "the cache grows along its tokens, [B, H, T, d_k] -> [B, H, T+1, d_k]; joined along H, the cached "
          "T tokens and the one new token must then line up, so torch refuses at the first step",
          ("cat-sizes-mismatch",), forces={"decode": 2}, shape="decode"),
    Break("causal-at-decode", "SDPA with is_causal=True at a one-query decode step",
          "torch aligns its causal mask top-left, ones(1, T+1).tril(): the new query, the last position, "
          "sees key 0 only instead of every cached key", ("causal-mask-misaligned",), forces={"decode": 2},
          shape="decode", impl="sdpa"),
    # -- the image run (--image SIZE --patch P): conv patches and a class token --
    Break("patches-without-permute", "conv(x).view(B, -1, D): patches turned into tokens without the transpose",
          "the conv's output is [B, D, Hp, Wp], features first; a view keeps that memory order, so each "
          "'token' is a run of one feature across several patches, not one patch's D features",
          ("mixed-axis",), forces={"image": 32, "patch": 8}, shape="image"),
    Break("cls-token-wrong-axis", "torch.cat([cls, x]): the class token joined without dim=1",
          "cat joins along axis 0, the batch, when no dim is given: [B, 1, D] and [B, N, D] then must agree "
          "on the tokens (1 against N), so torch refuses; the class token belongs in front of the patches",
          ("cat-sizes-mismatch",), forces={"image": 32, "patch": 8}, shape="image"),
    # -- broken functions only (the mutants of the test-writing exercises) --
    Break("transpose-h-dk", "view(B, T, H, d_k).transpose(2, 3): swaps H and d_k instead of T and H",
          "the heads stay behind the tokens; when T, H and d_k are equal the shape still looks right",
          model=False),
    Break("tril-for-triu", "a causal mask built with tril(-1) instead of triu(1)",
          "it hides the past and shows the future: every query attends to the keys after it", model=False),
    Break("diagonal-masked", "a causal mask built with triu() instead of triu(1)",
          "it also hides the diagonal: no token attends to itself, and query 0 has no key left (a NaN row)",
          model=False),
    Break("off-by-one", "a causal mask built with triu(2) instead of triu(1)",
          "query t also sees key t + 1, one token of the future", model=False),
    Break("no-mask", "attention weights with no causal mask at all",
          "every query attends to every key, the future included; rows still sum to 1", model=False),
    Break("repeat-tiles", "kv.repeat(1, n_rep, 1, 1) for grouped-query attention",
          "repeat tiles the kv heads (0, 1, 0, 1, ...) where each query group needs its own head repeated "
          "in place (0, 0, 1, 1, ...): repeat_interleave's order", model=False),
    Break("expand-wrong-axis", "kv[:, None].expand(B, n_rep, H_kv, T, d_k): the new axis before the kv heads",
          "flattening (n_rep, H_kv) tiles the kv heads just like repeat does", model=False),
    Break("first-head-only", "kv[:, :1].expand(...): kv head 0 for every query head",
          "with one kv head it is right; with more, every group reads the first group's keys", model=False),
    Break("interleave-tokens", "kv.repeat_interleave(n_rep, dim=2): repeats along the tokens",
          "the right function on the wrong axis: the tokens are repeated, not the heads", model=False),
    # -- lessons 9 to 12: a KV cache, images as tokens, fused kernels (broken functions only) --
    Break("cache-new-first", "torch.cat([step, cache], dim=2): the new step in front of the cache",
          "the shape is right, but key t no longer sits at position t: the newest token is read as the oldest",
          model=False),
    Break("cache-drops-oldest", "torch.cat([cache[:, :, 1:], step], dim=2): a sliding window for a growing cache",
          "the cache keeps T steps forever and forgets the prompt one step at a time", model=False),
    Break("cache-stale-step", "torch.cat([cache, cache[:, :, -1:]], dim=2): the last old step appended again",
          "the shape grows as it should, but the new token's key and value never enter the cache", model=False),
    Break("cache-first-head-step", "step[:, :1].expand_as(step): kv head 0's new step for every kv head",
          "right with one kv head; with more, every head but the first caches another head's key", model=False),
    Break("unfold-without-transpose", "F.unfold(x, p, stride=p) used as the tokens: [B, C * p * p, N]",
          "unfold puts each patch in a column: the tokens are on the last axis until a transpose(1, 2)",
          model=False),
    Break("patches-column-major", "patches numbered down the columns: permute(..., w, h, ...)",
          "patch n is no longer the n-th patch in reading order, so position embeddings go to the wrong squares",
          model=False),
    Break("patch-pixels-transposed", "each patch flattened column by column",
          "the pixels inside every patch are transposed, which a Conv2d patch embedding's weights do not expect",
          model=False),
    Break("patches-channel-last", "each patch flattened as (p, p, C) where F.unfold and Conv2d use (C, p, p)",
          "a linear layer loaded from a Conv2d patch embedding then mixes channels and pixels", model=False),
    Break("rope-table-on-heads", "cos[:, None, :] for x as [B, H, T, d_k]: the rotary table on the head axis",
          "[T, 1, d_k] is the layout for x as [B, T, H, d_k]; against [B, H, T, d_k] broadcasting puts the "
          "positions on the heads: most sizes raise, and with T = H it runs and turns head h by position h's "
          "angle", model=False),
    Break("rope-sign-flipped", "rotate_half as cat(x2, -x1): every pair turned backwards",
          "the rotation by -angle; at position 0 (angle 0) it changes nothing, so a test there sees nothing",
          model=False),
    Break("rope-neighbour-pairs", "pairs (2i, 2i+1) rotated with a table in rotate_half's (i, i + d_k/2) layout",
          "the two conventions (Meta's complex pairs, GPT-NeoX's halves) agree only when d_k = 2", model=False),
    Break("rope-cos-only", "x * cos without the rotate_half(x) * sin term",
          "each feature is scaled, none is turned; at position 0 cos is 1 and sin 0, so it looks right",
          model=False),
    Break("sdpa-wrong-layout", "F.scaled_dot_product_attention on [B, T, H, d_k]",
          "SDPA attends over axis -2: given token-major tensors, each token attends over its own heads",
          model=False),
    Break("sdpa-no-transpose-back", "SDPA's [B, H, T, d_k] output returned without transposing it back",
          "the caller expects [B, T, H, d_k]; when T = H even the shape looks right", model=False),
    Break("sdpa-view-not-transpose", "[B, T, H, d_k] reshaped to [B, H, T, d_k] for SDPA instead of transposed",
          "reshape keeps memory order, so each 'head' is a run of features from several tokens", model=False),
    Break("sdpa-is-causal", "is_causal=True in an encoder that needs no mask",
          "every query loses the keys after it; a one-token input cannot show it", model=False),
    Break("sdpa-wrong-scale", "scale=1 / d_k in SDPA instead of its default 1 / sqrt(d_k)",
          "the scores are sqrt(d_k) times too small and the weights too flat; with d_k = 1 nothing changes",
          model=False),
    # -- lesson 13: backward passes written by hand (broken functions only) --
    Break("softmax-grad-no-row-term", "a softmax backward dS = P ⊙ dP, without the row term",
          "each row of P sums to 1, so one score moves every weight of its row: dS = P ⊙ (dP − Σ dP ⊙ P); "
          "dv and every shape are still right", model=False),
    Break("softmax-grad-no-scale", "dq and dk without the 1/√d_k the forward divided the scores by",
          "the chain rule carries the scale into the backward; with d_k = 1 nothing changes", model=False),
    Break("grad-dv-from-scores", "dv = Sᵀ · dY, the scores before the softmax, instead of Pᵀ · dY",
          "v was multiplied by the weights P, so its grad is Pᵀ · dY; the shape is the same either way",
          model=False),
    Break("grad-dk-not-transposed", "dk = dS · q instead of dSᵀ · q",
          "S = q · kᵀ, so k's grad is dSᵀ · q, [T_k, d_k]; with as many queries as keys dS · q has that shape "
          "too, and the wrong values", model=False),
]


def _source(fn) -> str:
    """The source of ``fn`` without its decorator (the code says nothing about which bug it is)."""
    lines, functions = _functions_of(inspect.getmodule(fn).__name__)
    node = functions[fn.__code__.co_firstlineno]
    return textwrap.dedent("".join(lines[node.lineno - 1:node.end_lineno]))


@cache
def _functions_of(module: str) -> tuple[list[str], dict[int, ast.FunctionDef]]:
    """A module's source lines and its top-level functions by their first line (a decorator's, if any):
    parsed once per module, not once per function."""
    lines = inspect.getsourcelines(sys.modules[module])[0]
    tree = ast.parse("".join(lines))
    return lines, {min([d.lineno for d in n.decorator_list] + [n.lineno]): n
                   for n in tree.body if isinstance(n, ast.FunctionDef)}


@lru_cache(maxsize=1)
def _catalogue() -> dict[str, Break]:
    out = {b.name: b for b in _ENTRIES}
    for filed in FILED:
        entry = out[filed.break_id]
        fn = BrokenFunction(filed.fn.__name__, filed.does, _source(filed.fn))
        out[filed.break_id] = replace(entry, functions=entry.functions + (fn,))
    return out


#: Every entry of the catalogue, whole-model breaks first.
CATALOGUE: dict[str, Break] = _catalogue()
#: The whole-model breaks: what ``shapetrace run --break NAME`` runs.
BREAKS: dict[str, Break] = {name: b for name, b in CATALOGUE.items() if b.model}
#: The breaks of the plain forward pass (not of a ``--decode`` or ``--image`` run): the ones the leak
#: analysis (:func:`leak_config`, :func:`shapetrace.engine.findings.compare_outputs`) runs on.
ATTENTION_BREAKS: dict[str, Break] = {name: b for name, b in BREAKS.items() if b.shape == "attention"}


def apply_forces(config: AttentionConfig) -> tuple[AttentionConfig, list[str]]:
    """The config a break needs to run (e.g. T = d_k), and a note for each change."""
    brk = BREAKS.get(config.broken or "")
    if brk is None:
        return config, []
    notes = []
    if brk.forces.get("seq_len") == "d_k" and config.seq_len != config.d_k:
        notes.append(f"--break {brk.name} runs with T = d_k = {config.d_k} (instead of {config.seq_len}) "
                     "so that q @ k has matching inner sizes and runs silently")
        config = replace(config, seq_len=config.d_k, pad=())
        if config.mask == "padding":
            config = replace(config, pad=default_pad(config.batch, config.seq_len))
    if "decode" in brk.forces and config.decode is None:
        steps = brk.forces["decode"]
        notes.append(f"--break {brk.name} is a decoding bug: it runs with --decode {steps} (a prefill of "
                     f"{config.seq_len} tokens, then {steps} one-token steps)")
        config = replace(config, decode=steps)
    if "image" in brk.forces and config.image is None:
        size, patch = brk.forces["image"], brk.forces["patch"]
        notes.append(f"--break {brk.name} is a patch-embedding bug: it runs with --image {size} --patch {patch}")
        config = replace(config, image=size, patch=patch)
    if brk.forces.get("mask") == "padding" and config.mask != "padding":
        pad = default_pad(config.batch, config.k_len)
        notes.append(f"--break {brk.name} needs a padding mask: using --mask padding --pad "
                     f"{','.join(map(str, pad))}")
        config = replace(config, mask="padding", pad=pad)
    return config, notes


#: d_k of the leak analysis: two features per head (one could let a size-1 axis hide a reshape's order).
LEAK_D_K = 2


def leak_config(config: AttentionConfig) -> AttentionConfig:
    """A smaller config whose token-to-token dependencies are those of ``config``, for the leak analysis
    (one perturbed copy per token: its cost grows with D²).

    Why the dependencies do not change: they are decided by which token each row of every tensor comes
    from. Every view, reshape and transpose of the catalogue moves whole blocks of d_k features (d_k is
    the innermost axis), so dividing out d_k leaves the same index arithmetic on (B, T, H): a view of
    ``[B, T, H·d_k]`` as ``[B, H, T, d_k]`` puts token t·H + h at (h', t') with h'·T + t' = t·H + h, for
    any d_k. Linear layers act on each token's features, so their width does not matter either. One
    bug contracts d_k against T (``q @ k`` with T = d_k): d_k stays, and its heads, each the same
    computation on its own slice, shrink to one. ``tests/attention/test_leaks.py`` checks every break against
    the full-size analysis.
    """
    brk = BREAKS[config.broken or ""]
    if brk.leak_free == "heads":
        return replace(config, heads=1, d_model=config.d_k)
    return replace(config, d_model=config.heads * min(config.d_k, LEAK_D_K))


def default_pad(batch: int, length: int) -> tuple[int, ...]:
    """0, 2, 4... padding tokens (capped to leave one real token): ``(0, 2)`` for two sequences."""
    return tuple(min(2 * i, length - 1) for i in range(batch))
