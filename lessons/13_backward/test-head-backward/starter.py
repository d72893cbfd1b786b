"""Exercise test-head-backward: write a test that catches a wrong hand-written backward.

check() receives one implementation of head_backward(q, k, v, dy) -> (dq, dk, dv) and must raise
(an assert is enough) when it is wrong. This one checks the shapes only.
Run `shapetrace exercise check test-head-backward`.
"""

import torch


def check(head_backward):
    q, k, v, dy = torch.randn(5, 4), torch.randn(7, 4), torch.randn(7, 4), torch.randn(5, 4)
    dq, dk, dv = head_backward(q, k, v, dy)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
