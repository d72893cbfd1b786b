"""Exercise head-dim: d_k from d_model and heads, or a clear error."""


def head_dim(d_model: int, heads: int) -> int:
    return d_model // heads                                # d_k
