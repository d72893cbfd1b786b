"""The backward pass of a traced forward: every gradient autograd computes, tied to the forward op it
differentiates, and every tensor autograd keeps for it.

Three pieces, one module each:

* :mod:`.graph` — while the forward runs, each recorded call's autograd nodes (its output's ``grad_fn``
  and the nodes inside it, down to its operands) are claimed for its record, and hooked, so that a
  backward run later (ours or the user's own ``.backward()``) reports each node's incoming and outgoing
  gradients as raw facts (shape, strides, storage), in the order autograd runs them;
* :mod:`.saved` — ``torch.autograd.graph.saved_tensors_hooks`` for the forward: every tensor autograd
  saves, tied to the node that saved it (and so to its record);
* :mod:`.rows` — after the run, plain data (:class:`~.rows.BackwardReport`): one row per forward op in
  the order autograd ran it, its gradients named with the forward tensors' axis names.

Nothing here is imported unless a trace asks for its backward (``trace(backward=True)``).
"""
