"""One ``shapetrace run`` as one frozen request: its options, validated once, before torch is imported.

The defaults live here and in :class:`~shapetrace.attention.config.AttentionConfig` (the model and
variant options), nowhere else: ``run``'s Typer options read theirs from :class:`RunRequest`.

>>> RunRequest(causal=True).is_variant, RunRequest().config.d_k
(True, 64)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any

from shapetrace.app.classroom import ClassroomRequest, predict_mode
from shapetrace.app.devices import DEFAULT_DEVICE, DEFAULT_MAX_MEMORY, parse_memory
from shapetrace.attention.config import AttentionConfig
from shapetrace.attention.memory import forced_variant_bytes, reference_bytes
from shapetrace.attention.presets import get_preset
from shapetrace.errors import UsageError

#: The model and variant defaults, declared once: by AttentionConfig.
MODEL = AttentionConfig()
#: The options that make a run a variant (anything beyond the plain reference) when off their defaults.
VARIANT_OPTIONS = ("causal", "mask", "pad", "pad_side", "kv_len", "kv_heads", "impl", "preset", "broken",
                   "dropout", "train", "safe_softmax", "decode", "image", "patch", "channels")
#: The sizes ``--preset`` fills in, unless typed.
PRESET_SIZES = ("d_model", "heads")
#: ``run``'s options that :meth:`ClassroomRequest.checked` takes by the same name.
CLASSROOM_OPTIONS = ("width", "compact", "explain", "long_names", "export", "theme", "step", "auto", "answers",
                     "force", "static", "json_out", "all_ops", "ops")


def parse_pad(text: str | None) -> tuple[int, ...]:
    """``"0,2"`` -> ``(0, 2)``."""
    if not text:
        return ()
    try:
        return tuple(int(p) for p in text.replace(" ", "").split(","))
    except ValueError:
        raise UsageError(f"cannot read --pad {text!r}: give one whole number of padding tokens per "
                         "sequence, separated by commas (e.g. --pad 0,2)") from None


@dataclass(frozen=True)
class RunRequest:
    """Every option of one ``shapetrace run``, as typed (``pad`` as text, ``max_memory`` as a size).

    :meth:`from_options` builds and validates it; :attr:`config` and :attr:`budget` are what the run uses.
    """

    # the model (defaults: AttentionConfig's)
    d_model: int = MODEL.d_model
    heads: int = MODEL.heads
    batch: int = MODEL.batch
    seq_len: int = MODEL.seq_len
    seed: int = MODEL.seed
    preset: str | None = None
    # the variants
    causal: bool = MODEL.causal
    mask: str = MODEL.mask
    pad: str | None = None   #: ``--pad 0,2``: parsed into AttentionConfig.pad
    pad_side: str = MODEL.pad_side
    kv_len: int | None = MODEL.kv_len
    kv_heads: int | None = MODEL.kv_heads
    impl: str = MODEL.impl
    broken: str | None = MODEL.broken
    dropout: float = MODEL.dropout
    train: bool = MODEL.train
    safe_softmax: bool = MODEL.safe_softmax
    decode: int | None = MODEL.decode
    image: int | None = MODEL.image
    patch: int | None = MODEL.patch
    channels: int | None = MODEL.channels
    # the output
    json_out: bool = False
    backward: bool = False   #: ``--backward``: the backward pass after the forward, and what autograd keeps
    diagrams: bool = False
    diagram: int | None = None
    classroom: ClassroomRequest = ClassroomRequest()
    # the device
    device: str = DEFAULT_DEVICE
    max_memory: str = DEFAULT_MAX_MEMORY
    #: the options typed on the command line, not left at their defaults (click's parameter source)
    typed: frozenset[str] = frozenset()

    @classmethod
    def from_options(cls, options: Mapping[str, Any], typed: Iterable[str] = ()) -> RunRequest:
        """The validated request of ``run``'s parsed options (every one, keyed by parameter name): the
        classroom options first, then as :meth:`checked` (a UsageError names the first bad option)."""
        classroom = ClassroomRequest.checked(**{name: options[name] for name in CLASSROOM_OPTIONS},
                                             predict=predict_mode(options["predict"], options["predict_what"]))
        own = {f.name: options[f.name] for f in fields(cls) if f.name in options}
        return cls(**own, classroom=classroom, typed=frozenset(typed)).checked()

    def checked(self) -> RunRequest:
        """This request ready to run: ``--preset``'s sizes filled in, its config and ``--max-memory`` checked
        (``--break list`` needs neither)."""
        if self.lists_catalogue:
            return self
        if self.image is not None and "seq_len" in self.typed:
            raise UsageError("--seq-len cannot be combined with --image: the tokens are the image's patches and "
                             "a class token (1+N, from --image and --patch)")
        self._check_backward()
        request = self.with_preset()
        request.config, request.budget  # noqa: B018 - built once, now: a bad size or --max-memory answers here
        return request

    def _check_backward(self) -> None:
        """``--backward`` traces one forward and its backward: not a decode (inference: no backward runs
        through a KV cache); the table, step mode, predict mode and the exports show it."""
        if not self.backward:
            return
        if self.decode is not None:
            raise UsageError("--backward does not apply to --decode: decoding with a KV cache is inference, its "
                             "steps run without gradients and no backward runs through the cache; run --backward "
                             "without --decode to see the backward of the same attention")

    def with_preset(self) -> RunRequest:
        """A new request with ``--preset``'s D and H where the user left the defaults, and its H_kv when
        neither was typed (nor ``--kv-heads``, nor ``--break``)."""
        if self.preset is None:
            return self
        p = get_preset(self.preset)   # ('' is no preset name: it ran the default sizes without a word)
        sizes = {name: getattr(p, name) for name in PRESET_SIZES if name not in self.typed_sizes}
        if self.kv_heads is None and p.kv_heads and not self.typed_sizes and not self.broken:
            sizes["kv_heads"] = p.kv_heads
        return replace(self, **sizes)

    @property
    def typed_sizes(self) -> list[str]:
        """The preset's sizes the user typed (and so keeps), in order."""
        return sorted(set(PRESET_SIZES) & self.typed)

    @property
    def preset_note(self) -> str | None:
        """What ``--preset`` set, where it comes from, and how to run its full context."""
        if not self.preset:
            return None
        p = get_preset(self.preset)
        kept = self.typed_sizes
        overridden = f" (your {', '.join('--' + g.replace('_', '-') for g in kept)} kept)" if kept else ""
        return (f"preset {p.describe()}{overridden}; source: {p.source}. This run uses T={self.seq_len}; "
                f"pass --seq-len {p.context} for the full context.{self._bias_note(p)}")

    def _bias_note(self, p) -> str:
        """LLaMA's projections have no biases; the model traced here has them: say so, with both counts."""
        if p.bias:
            return ""
        c = self.config
        biases = 2 * c.d_model + 2 * c.h_kv * c.d_k if c.grouped else 4 * c.d_model
        return (f" {p.name} has no biases in its attention projections; the model traced here has "
                f"{biases:,}, so its {c.param_count:,} parameters are {c.param_count - biases:,} in {p.name}.")

    @property
    def lists_catalogue(self) -> bool:
        """``--break list``: show the catalogue of classic bugs, trace nothing."""
        return self.broken == "list"

    @property
    def is_variant(self) -> bool:
        """Did the user ask for anything beyond the plain reference?"""
        return any(getattr(self, f.name) != f.default for f in fields(self) if f.name in VARIANT_OPTIONS)

    @cached_property
    def config(self) -> AttentionConfig:
        """The attention this request traces (its checks raise a UsageError on a bad size or variant)."""
        model = {f.name: getattr(self, f.name) for f in fields(AttentionConfig) if f.name != "pad"}
        return AttentionConfig(**model, pad=parse_pad(self.pad))

    @cached_property
    def budget(self) -> int:
        """``--max-memory`` in bytes."""
        return parse_memory(self.max_memory)

    @property
    def estimate(self) -> int:
        """Bytes of real tensors the run would take (for a variant: with a ``--break``'s forced sizes)."""
        return forced_variant_bytes(self.config) if self.is_variant else reference_bytes(self.config)
