"""Reference solution for head-dim."""


def head_dim(d_model: int, heads: int) -> int:
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}: "
                         f"{heads} heads of {d_model // heads} cover {heads * (d_model // heads)}")
    return d_model // heads                                # d_k
