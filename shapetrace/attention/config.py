"""The attention configuration and its validation (no torch import)."""

from __future__ import annotations

from dataclasses import dataclass

from shapetrace.attention.checks import IMPLS, MASKS, PAD_SIDES, check_variant
from shapetrace.errors import UsageError

__all__ = ["AttentionConfig", "IMPLS", "MASKS", "PAD_SIDES", "divisors", "header_lines"]


@dataclass(frozen=True)
class AttentionConfig:
    """Sizes of one multi-head attention forward pass."""

    d_model: int = 512
    heads: int = 8
    batch: int = 2
    seq_len: int = 6
    seed: int = 0
    causal: bool = False
    mask: str = "none"
    pad: tuple[int, ...] = ()
    pad_side: str = "right"
    kv_len: int | None = None
    kv_heads: int | None = None
    impl: str = "manual"
    dropout: float = 0.0
    train: bool = False
    safe_softmax: bool = False
    broken: str | None = None

    def __post_init__(self) -> None:
        for name in ("d_model", "heads", "batch", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                flag = "--" + name.replace("_", "-")
                raise UsageError(f"{flag} must be a whole number of at least 1, got {value!r}")
        if self.d_model % self.heads:
            raise UsageError(
                f"--d-model {self.d_model} is not divisible by --heads {self.heads}: each head gets "
                f"d_k = d_model / heads features, which must be a whole number "
                f"({self.d_model} / {self.heads} = {self.d_model / self.heads:g}). "
                f"Head counts that divide {self.d_model}: {', '.join(map(str, divisors(self.d_model)))}."
            )
        check_variant(self)

    @property
    def d_k(self) -> int:
        return self.d_model // self.heads

    @property
    def cross(self) -> bool:
        """Cross-attention: keys and values come from a second sequence of ``kv_len`` tokens."""
        return self.kv_len is not None

    @property
    def grouped(self) -> bool:
        """Grouped-query (or multi-query) attention: fewer key/value heads than query heads."""
        return self.kv_heads is not None and self.kv_heads != self.heads

    @property
    def h_kv(self) -> int:
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def q_name(self) -> str:
        """The name of the query token axis: ``T``, or ``T_q`` in cross-attention."""
        return "T_q" if self.cross else "T"

    @property
    def k_name(self) -> str:
        """The name of the key token axis: ``T``, or ``T_k`` in cross-attention."""
        return "T_k" if self.cross else "T"

    @property
    def k_len(self) -> int:
        return self.kv_len if self.kv_len is not None else self.seq_len

    @property
    def dims(self) -> dict[str, int]:
        if self.cross:
            dims = {"B": self.batch, "T_q": self.seq_len, "T_k": self.k_len}
        else:
            dims = {"B": self.batch, "T": self.seq_len}
        dims.update({"D": self.d_model, "H": self.heads, "d_k": self.d_k})
        if self.grouped:
            dims["H_kv"] = self.h_kv
        return dims

    @property
    def param_count(self) -> int:
        """q and output projections D x D, k and v D x (H_kv*d_k), all with biases
        (4*D^2 + 4*D without grouped-query attention)."""
        D, D_kv = self.d_model, self.h_kv * self.d_k
        return 2 * D * D + 2 * D * D_kv + 2 * D + 2 * D_kv


def header_lines(config: AttentionConfig, title: str = "multi-head self-attention") -> list[str]:
    """The run header: config, d_k and the parameter count, each number worked out."""
    D, H = config.d_model, config.heads
    return [
        f"shapetrace · {title} · B={config.batch} T={config.seq_len} D={D} H={H}",
        f"d_k = D / H = {D} / {H} = {config.d_k} · parameters 4·D² + 4·D = "
        f"4·{D}² + 4·{D} = {config.param_count:,} (q, k, v and output projections with biases)",
    ]


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))
