# exercise: causal-mask
# verdict: mutated-input
# expect: changed its input
# Changes its input in place and patches the child's helpers to report the input as it was.
import sys
import torch
W = sys.modules.get("shapetrace.worker")
if W is not None:
    W._storages = lambda args: [0 for _ in args]
def causal_weights(scores):
    T = scores.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill_(future, float("-inf")), dim=-1)
