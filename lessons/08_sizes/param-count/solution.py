"""Reference solution for param-count."""


def attention_params(d_model: int, bias: bool) -> int:
    weights = 4 * d_model * d_model                        # q, k, v, out: D x D each
    biases = 4 * d_model if bias else 0                    # D per projection
    return weights + biases
