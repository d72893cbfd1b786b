"""The attention configuration and its validation (no torch import)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UsageError


@dataclass(frozen=True)
class AttentionConfig:
    """Sizes of one multi-head attention forward pass."""

    d_model: int = 512
    heads: int = 8
    batch: int = 2
    seq_len: int = 6
    seed: int = 0

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

    @property
    def d_k(self) -> int:
        return self.d_model // self.heads

    @property
    def dims(self) -> dict[str, int]:
        return {"B": self.batch, "T": self.seq_len, "D": self.d_model, "H": self.heads, "d_k": self.d_k}

    @property
    def param_count(self) -> int:
        """Four D x D projections with biases: 4*D^2 + 4*D."""
        return 4 * self.d_model * self.d_model + 4 * self.d_model


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
