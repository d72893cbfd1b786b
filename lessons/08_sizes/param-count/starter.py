"""Exercise param-count: parameters of multi-head attention."""


def attention_params(d_model: int, bias: bool) -> int:
    return 4 * d_model * d_model                           # 4 D x D weights
