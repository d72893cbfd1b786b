"""``shapetrace trace --backward``: a script's own ``.backward()`` calls traced (the first in full, the others
counted and compared), ``--loss NAME``, the backward's findings; and without ``--backward``, one line that says
the script ran backward passes that the table does not show."""

from __future__ import annotations

import json

from conftest import cli_in_process

DIMS = ("--dims", "B=2,T=5,D=8,H=4")

# nanoGPT's CausalSelfAttention without the mask (karpathy/nanoGPT, model.py: c_attn, split, view + transpose,
# q @ kᵀ · 1/√d_k, softmax, att @ v, transpose + contiguous + view, c_proj) and its training loop (train.py:
# zero_grad, loss.backward(), step), STEPS steps
LOOP = '''import math
import torch
from torch import nn
torch.manual_seed(0)

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd=8, n_head=4):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.softmax(dim=-1)
        {fill}
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

model = CausalSelfAttention()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range({steps}):
    x = torch.randn(2, 5, 8)
    loss = model(x).pow(2).mean()
    {backward}
'''
TRAIN = "optimizer.zero_grad(set_to_none=True); loss.backward(); optimizer.step()"


def _script(tmp_path, steps: int = 3, backward: str = TRAIN, fill: str = "pass"):
    path = tmp_path / "train.py"
    path.write_text(LOOP.format(steps=steps, backward=backward, fill=fill))
    return str(path)


def test_trace_says_the_backward_passes_it_does_not_show(tmp_path):
    script = _script(tmp_path)
    proc = cli_in_process("trace", script, *DIMS, "--width", "300")
    assert proc.returncode == 0, proc.stderr
    assert (f"i the script ran 3 backward passes (.backward()), not shown: shapetrace trace --backward {script} "
            "traces them (the first in full)") in proc.stdout
    assert "backward pass (in the order autograd ran it)" not in proc.stdout


def test_a_script_without_a_backward_gets_no_such_line(tmp_path):
    proc = cli_in_process("trace", _script(tmp_path, backward="pass"), *DIMS, "--width", "300")
    assert proc.returncode == 0, proc.stderr
    assert "backward pass" not in proc.stdout


def _json_backward(*args: str) -> tuple[dict, str]:
    proc = cli_in_process("trace", *args, *DIMS, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["backward"], proc.stderr


# a functional step with torch.autograd.grad instead of .backward(), as MAML-style inner loops take their grads
# (learn2learn's and the "higher" library's examples: grads = torch.autograd.grad(loss, params); each parameter
# moved by -lr · grad under no_grad)
AUTOGRAD_GRAD = ("grads = torch.autograd.grad(loss, list(model.parameters()))\n"
                 "    with torch.no_grad():\n"
                 "        for p, g in zip(model.parameters(), grads):\n"
                 "            p -= 1e-3 * g")


def test_torch_autograd_grad_calls_are_counted_as_backward_passes_and_named(tmp_path):
    """Before, only ``.backward()`` was counted: a loop of autograd.grad steps was said to run none."""
    script = _script(tmp_path, backward=AUTOGRAD_GRAD)
    proc = cli_in_process("trace", script, *DIMS, "--width", "300")
    assert proc.returncode == 0, proc.stderr
    assert (f"i the script ran 3 backward passes (torch.autograd.grad()), not shown: shapetrace trace --backward "
            f"{script} traces them (the first in full)") in proc.stdout
    both = _script(tmp_path, steps=2, backward="loss.backward(retain_graph=True); torch.autograd.grad(loss, "
                                               "model.c_proj.weight)")
    assert "i the script ran 4 backward passes (.backward() and torch.autograd.grad()), not shown" in \
        cli_in_process("trace", both, *DIMS, "--width", "300").stdout


def test_parameters_whose_grads_autograd_grad_returned_are_not_said_to_get_none(tmp_path):
    """autograd.grad leaves ``.grad`` empty: its call was recorded as an unknown op whose results are outside
    autograd, and every parameter was then said to get no gradient, "cut at a ?" (a false warning)."""
    proc = cli_in_process("trace", _script(tmp_path, backward=AUTOGRAD_GRAD), *DIMS, "--backward", "--width", "300")
    assert proc.returncode == 0, proc.stderr
    assert "parameter-without-grad" not in proc.stdout and "cut at a ?" not in proc.stdout
    assert "i the script ran 3 backward passes; the backward table shows the first (all 2 others ran the same " \
           "autograd nodes)" in proc.stdout
    loop, _ = _json_backward(_script(tmp_path, backward=AUTOGRAD_GRAD), "--backward")
    assert (loop["runs"], loop["alike"]) == (3, 3)
    assert next(r for r in loop["rows"] if r["op"] == "softmax")["arrived"][0]["dims"] == ["B", "H", "T", "T"]


def test_trace_backward_shows_the_first_of_the_loops_backward_passes_and_counts_the_others(tmp_path):
    loop, _ = _json_backward(_script(tmp_path, steps=3), "--backward")
    single, _ = _json_backward(_script(tmp_path, steps=1), "--backward")
    assert (loop["runs"], loop["alike"], single["runs"]) == (3, 3, 1)
    # the first step's backward, folded: the same rows and the same saved tensors as a one-step script
    assert [(r["op"], r["nodes"]) for r in loop["rows"]] == [(r["op"], r["nodes"]) for r in single["rows"]]
    assert (loop["saved_bytes"], len(loop["saved"])) == (single["saved_bytes"], len(single["saved"]))
    softmax = next(r for r in loop["rows"] if r["op"] == "softmax")
    assert softmax["arrived"][0]["dims"] == ["B", "H", "T", "T"] and softmax["arrived"][0]["shape"] == [2, 4, 5, 5]
    w = next(p for p in loop["params"] if p["of"] == "c_attn.weight.grad")
    assert (w["shape"], w["stride"]) == ([24, 8], [8, 1])


def test_trace_backward_in_the_table_view(tmp_path):
    proc = cli_in_process("trace", _script(tmp_path, steps=2), *DIMS, "--backward", "--width", "300")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "backward pass (in the order autograd ran it)" in out
    assert "i the script ran 2 backward passes; the backward table shows the first (1 other ran the same " \
           "autograd nodes)" in out


def test_loss_names_the_scalar_whose_backward_is_traced(tmp_path):
    # a script that computes its loss and never calls .backward() (an evaluation script)
    backward, _ = _json_backward(_script(tmp_path, steps=1, backward="pass"), "--loss", "loss")
    assert backward["runs"] == 1 and backward["note"] == ""
    assert backward["rows"][0]["op"] == "mean"   # the loss's own op runs first
    assert {p["of"] for p in backward["params"]} == {"c_attn.weight.grad", "c_attn.bias.grad",
                                                      "c_proj.weight.grad", "c_proj.bias.grad"}


def test_loss_that_is_not_there_is_one_usage_line(tmp_path):
    script = _script(tmp_path, steps=1, backward="pass")
    for name, why in (("los", "the script's top level has no variable named 'los'"),
                      ("step", "the script's top level holds a int, not a tensor, named 'step'"),
                      ("x", "x has 80 elements; the backward starts from a scalar that requires grad")):
        proc = cli_in_process("trace", script, *DIMS, "--loss", name)
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        assert why in proc.stderr and "Traceback" not in proc.stderr


def test_trace_backward_refuses_the_views_it_does_not_show_yet(tmp_path):
    script = _script(tmp_path, steps=1)
    for extra in (("--step",), ("--only", "CausalSelfAttention.forward"), ("--export", str(tmp_path / "t.svg"))):
        proc = cli_in_process("trace", script, *DIMS, "--backward", *extra)
        assert proc.returncode == 2, (extra, proc.stdout, proc.stderr)
        assert f"--backward cannot be combined with {extra[0]} yet" in proc.stderr


def test_a_training_loop_that_overwrites_the_weights_fails_as_untraced_and_is_told_why(tmp_path):
    # the softmax's weights zeroed in place after it saved them (yashbonde/dall-e-baby issue #1): the script's
    # own loss.backward() raises torch's error under the trace as it does untraced, and the finding names the fill
    _script(tmp_path, steps=2, fill="att.masked_fill_(att < 0.05, 0.0)")
    proc = cli_in_process("trace", "train.py", *DIMS, "--backward", "--width", "300", cwd=tmp_path)
    assert proc.returncode == 1
    assert "one of the variables needed for gradient computation has been modified by an inplace operation" in \
        proc.stdout + proc.stderr
    assert "error inplace-on-saved" in proc.stdout
    assert ("✗ error inplace-on-saved at #11: #11 masked_fill_ (train.py:21) writes in place into the [B, H, T, T] "
            "tensor that #10 softmax (train.py:20) saved for its backward (SoftmaxBackward0 needs it: version 0 when "
            "saved, 1 now)") in proc.stdout


def test_a_refused_backward_gets_its_finding_not_the_generic_line_about_its_operands(tmp_path):
    # the same in-place fill (yashbonde/dall-e-baby issue #1): the loss, operand 0 of .backward(), is not what torch
    # refused; the finding says what was, and no line says to compare the loss's shape
    _script(tmp_path, steps=1, fill="att.masked_fill_(att < 0.05, 0.0)")
    proc = cli_in_process("trace", "train.py", *DIMS, "--backward", "--width", "300", cwd=tmp_path)
    assert proc.returncode == 1
    assert "error inplace-on-saved" in proc.stdout
    assert "torch refused backward" not in proc.stdout and "Compare their shapes" not in proc.stdout


# nanoGPT's training loop (train.py) with a pause before its backward, so that --max-ops stops it in the forward
SLOW = "import time; time.sleep(30); " + TRAIN


def test_a_script_stopped_at_max_ops_says_so_in_the_backward_note(tmp_path):
    proc = cli_in_process("trace", _script(tmp_path, steps=1, backward=SLOW), *DIMS, "--backward",
                          "--max-ops", "5", "--width", "300")
    assert proc.returncode == 0, proc.stderr
    assert "no backward ran: the recording stopped at --max-ops 5" in proc.stdout
    assert "the traced block raised" not in proc.stdout
