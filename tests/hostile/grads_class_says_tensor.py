# exercise: head-backward
# verdict: not-a-tensor
# expect: a tuple (Impostor, Impostor, Impostor)
# Objects whose __class__ claims torch.Tensor (so isinstance says yes) and whose detach() hands back itself.
import torch
class Impostor:
    __class__ = property(lambda self: torch.Tensor)
    def __init__(self, like):
        self.shape, self.dtype, self.device = like.shape, like.dtype, like.device
    def detach(self): return self
    def __eq__(self, other): return True
def head_backward(q, k, v, dy):
    return Impostor(q), Impostor(k), Impostor(v)
