"""The attention configuration and its validation (no torch import)."""

from __future__ import annotations

from dataclasses import dataclass

from shapetrace.attention.checks import IMPLS, MASKS, PAD_SIDES, check_variant
from shapetrace.attention.sizes import MAX_SIZE, check_size, shown
from shapetrace.errors import UsageError

__all__ = ["AttentionConfig", "IMPLS", "MASKS", "MAX_SIZE", "PAD_SIDES", "check_size", "divisors",
           "header_lines", "shown"]


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
    decode: int | None = None
    image: int | None = None
    patch: int | None = None
    channels: int | None = None

    def __post_init__(self) -> None:
        for name in ("d_model", "heads", "batch", "seq_len"):
            check_size("--" + name.replace("_", "-"), getattr(self, name))
        check_head_split(self.d_model, self.heads, "--d-model", "--heads")
        check_variant(self)
        check_elements(self)

    @property
    def d_k(self) -> int:
        return self.d_model // self.heads

    @property
    def grid(self) -> int:
        """Patches along each side of the image (``--image`` / ``--patch``); 0 without an image."""
        return self.image // self.patch if self.image and self.patch else 0

    @property
    def in_channels(self) -> int:
        """The image's channels C (3 unless ``--channels`` says otherwise)."""
        return self.channels if self.channels is not None else 3

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
        elif self.image:
            dims = {"B": self.batch}   # the 1+N tokens are named by the conv, the flatten and the cat
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


def check_head_split(d_model: int, heads: int, d_flag: str, h_flag: str, sep: str = " ") -> None:
    """H heads of d_k = D / H features each: H at most D, and a divisor of D (one line otherwise, naming
    the options as the user wrote them: ``--heads``/``--d-model`` for ``run``, ``H=``/``D=`` for ``--dims``)."""
    if heads > d_model:
        raise UsageError(f"{h_flag}{sep}{heads} is more than {d_flag}{sep}{d_model}: each head needs "
                         "at least one feature (d_k = D / H)")
    if d_model % heads:
        raise UsageError(f"{heads} does not divide {d_model}: {h_flag} must divide {d_flag} "
                         f"(d_k = D / H); {near_divisors(d_model, heads)}")


def check_named_sizes(sizes: dict[str, int]) -> None:
    """The checks ``run`` makes on its options, made on named sizes (``trace --dims``): every size within
    2**40, H divides D unless d_k is given (a head width set apart from D / H, as Gemma's head_dim),
    H_kv divides H."""
    for name, value in sizes.items():
        if value > MAX_SIZE:
            raise UsageError(f"--dims {name.partition(':')[0]}: {shown(value)} is too large: sizes go up to "
                             f"2**40 ({MAX_SIZE})")
    D, H = sizes.get("D"), sizes.get("H")
    if D is not None and H is not None and sizes.get("d_k") is None:
        check_head_split(D, H, "D", "--dims H", sep="=")
    H_kv = sizes.get("H_kv")
    if H is not None and H_kv is not None and (H_kv > H or H % H_kv):
        ok = [d for d in range(1, min(H, 10_000) + 1) if H % d == 0]
        raise UsageError(f"--dims H_kv={H_kv} must divide H={H}: each key/value head serves H / H_kv query "
                         f"heads, a whole number. Values that work: {', '.join(map(str, ok[:12]))}")


def header_lines(config: AttentionConfig, title: str = "multi-head self-attention") -> list[str]:
    """The run header: config, d_k and the parameter count, each number worked out."""
    D, H = config.d_model, config.heads
    return [
        f"shapetrace · {title} · B={config.batch} T={config.seq_len} D={D} H={H}",
        f"d_k = D / H = {D} / {H} = {config.d_k} · parameters 4·D² + 4·D = "
        f"4·{D}² + 4·{D} = {config.param_count:,} (q, k, v and output projections with biases)",
    ]


MAX_ELEMENTS = 2**62


def check_elements(config: AttentionConfig) -> None:
    """Every tensor of the forward pass must have fewer than 2**62 elements (torch indexes with int64)."""
    B, T, D, H = config.batch, max(config.seq_len, config.k_len) + (config.decode or 0), config.d_model, config.heads
    pixels = config.batch * config.in_channels * (config.image or 0) ** 2
    for what, n in (("the input B·T·D", B * T * D), ("a weight D·D", D * D), ("the scores B·H·T·T", B * H * T * T),
                    ("the image B·C·SIZE·SIZE", pixels)):
        if n >= MAX_ELEMENTS:
            raise UsageError(f"{what} would have {n:.3g} elements, more than torch can index (2**62): "
                             "use smaller sizes")


def near_divisors(n: int, h: int, reach: int = 100_000) -> str:
    """``heads that divide 512 near 7: 4, 8`` (searched within ``reach`` steps, so it never hangs)."""
    below = next((d for d in range(min(h, n), max(0, h - reach), -1) if n % d == 0), None)
    above = next((d for d in range(h + 1, min(n, h + reach) + 1) if n % d == 0), None)
    near = [str(d) for d in (below, above) if d is not None]
    return f"heads that divide {n} near {h}: {', '.join(near)}" if near else "try a power of two"


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))
