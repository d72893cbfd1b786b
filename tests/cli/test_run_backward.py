"""``shapetrace run --backward``: the backward table and what autograd keeps after the forward table,
``--json``'s ``backward`` object (schema 2), and one clear line where it does not apply."""

from __future__ import annotations

import json

from conftest import cli_in_process

SMALL = ("--d-model", "16", "--heads", "2", "--seq-len", "3", "--batch", "2")


def test_run_backward_prints_the_backward_after_the_forward_and_the_saved_totals_at_2t():
    proc = cli_in_process("run", "--backward", *SMALL)
    assert proc.returncode == 0, proc.stderr
    out = [line.rstrip() for line in proc.stdout.splitlines()]
    title = out.index("backward pass (in the order autograd ran it)")
    assert any(line.startswith("✓") for line in out[:title])   # the forward's verdict comes first
    # q's split-heads grads repeat v's fact for fact: one line, as the forward folds k's and v's split into q's
    assert out[title + 1].startswith("    0  grad #16 linear") and out[title + 1].endswith("(0, 0, 0)       4 B")
    assert "15-16  grad #2 transpose, #1 view · q: the same two grads as v, rows 9-10" in out
    assert "       → w_q.weight  [D=16, D=16]  (16, 1)  new 1 KiB" in out
    # the same model at T = 6: the [B, T, ·] tensors ×2, the [B, H, T, T] weights ×4 (2,064 B -> 4,416 B)
    assert "  at T=6 (2T): 4.3 KiB not parameters (×2.1), attention weights 576 B (×4.0), 13%" in out


def test_run_backward_json_has_the_backward_object_and_schema_2():
    proc = cli_in_process("run", "--backward", "--json", *SMALL)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["version"] == 2
    backward = data["backward"]
    assert backward["at_2T"] == {"T": 6, "saved_bytes": 5440, "activation_bytes": 4416, "weights_bytes": 576}
    assert (backward["saved_bytes"], backward["activation_bytes"], backward["weights_bytes"]) == (3088, 2064, 144)
    assert backward["rows"][0]["event"] == 16 and backward["rows"][0]["op"] == "linear"
    w_q = next(p for p in backward["params"] if p["of"] == "w_q.weight.grad")
    assert (w_q["shape"], w_q["dims"], w_q["stride"]) == ([16, 16], ["D", "D"], [16, 1])


def test_run_without_backward_has_no_backward_key():
    data = json.loads(cli_in_process("run", "--json", *SMALL).stdout)
    assert data["version"] == 2 and "backward" not in data


def test_run_backward_works_on_a_variant_gqa():
    proc = cli_in_process("run", "--backward", "--json", "--d-model", "16", "--heads", "4", "--kv-heads", "2",
                          "--seq-len", "3", "--batch", "2")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["backward"]["rows"]
    expand = next(r for r in rows if r["op"] == "expand")
    assert expand["arrived"][0]["dims"] == ["B", "H_kv", "n_rep", "T", "d_k"]
    assert expand["made"][0]["shape"] == [2, 2, 1, 3, 4]


def test_run_backward_refuses_what_it_does_not_show_yet_in_one_line():
    for extra, word in ((("--decode", "2"), "--decode"), (("--device", "meta"), "meta")):
        proc = cli_in_process("run", "--backward", *extra)
        assert proc.returncode == 2, (extra, proc.stdout, proc.stderr)
        assert word in proc.stderr and "Traceback" not in proc.stderr


def test_run_backward_predict_asks_the_grads_after_the_forward_instead_of_the_table(tmp_path):
    """Before, ``--backward --predict`` was refused (exit 2). Now predict mode walks the backward after the
    forward; answers from a file: the forward's 8 skipped, then w_o's db right and its dW as one [T, D] per
    batch row (dW sums over B and T)."""
    answers = tmp_path / "answers.txt"
    answers.write_text("\n" * 8 + "D\nT, D\n")
    proc = cli_in_process("run", "--backward", "--predict", "--answers", str(answers), *SMALL)
    assert proc.returncode == 0, proc.stderr
    out = [line.rstrip() for line in proc.stdout.splitlines()]
    assert "backward pass (in the order autograd ran it)" not in out   # the questions walk it, not the table
    assert "  ? grad shape for w_o.bias › D" in out and "   ✓ right: [D=16]" in out
    assert "  ? grad shape for w_o.weight › T, D" in out
    assert "   ✗ not quite: the grad for w_o.weight is [D=16, D=16] — axis 0 has size 16 (D), not 3" in out
    assert out[-1] == "score 1/10 (shapes 0/8 · grads 1/2), 8 skipped, 16 not asked (answers ran out)"


def test_the_readme_documents_every_key_of_a_backward_row():
    # the JSON section lists a row's keys: the schema the JSON prints, key for key (the row's module included)
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    documented = re.search(r'`\{"rows": \[\{([^}]*)\}\]', readme).group(1)
    row = json.loads(cli_in_process("run", "--backward", "--json", *SMALL).stdout)["backward"]["rows"][0]
    assert [k.strip().strip('"') for k in documented.split(",")] == list(row)
    assert row["module"] == "w_o"


def test_long_names_spell_the_backward_s_axes_as_the_forward_s_and_wrap_under_their_indent():
    # --long-names spelled the forward's table only: the backward kept B, T, D under a forward of batch, seq_len
    proc = cli_in_process("run", "--backward", "--long-names", *SMALL)
    assert proc.returncode == 0, proc.stderr
    out = [line.rstrip() for line in proc.stdout.splitlines()]
    title = out.index("backward pass (in the order autograd ran it)")
    assert out[title + 7:title + 10] == [
        "    1  grad #15 view        [batch=2, seq_len=3, d_model=16]          (48, 16, 1)     384 B",
        "       → operand 0  [batch=2, seq_len=3, heads=2, d_head=8]  (48, 16, 8, 1)  view",
        "       the incoming grad [batch, seq_len, d_model] is reshaped back to"]
    assert "   5 #11 softmax  SoftmaxBackward0  [batch=2, heads=2, seq_len=3, seq_len=3]  144 B" in out
    narrow = cli_in_process("run", "--backward", "--long-names", "--width", "80", *SMALL).stdout.splitlines()
    start = narrow.index("    2  grad #14 contiguous  [batch=2, seq_len=3, heads=2, d_head=8]   384 B")
    assert narrow[start + 1:start + 3] == [
        "       → operand 0 [batch=2, seq_len=3, heads=2, d_head=8] (48, 16, 8, 1) the",
        "         same tensor"]
    assert all(len(line) <= 80 for line in narrow)


def test_run_backward_on_an_image_reaches_the_patch_embeddings_conv_as_torch_does():
    # a ViT's patch embedding (timm's PatchEmbed: Conv2d(C, D, P, stride=P), flatten(2).transpose(1, 2)) and a
    # class token, then attention: training it sends a gradient back to the conv's weight
    from shapetrace.app.request import RunRequest
    from shapetrace.app.shapes import image_models

    args = ("--image", "16", "--patch", "8", "--d-model", "16", "--heads", "2")
    proc = cli_in_process("run", "--backward", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    backward = json.loads(proc.stdout)["backward"]
    conv = next(r for r in backward["rows"] if r["op"] == "conv2d")
    assert conv["arrived"][0]["dims"] == ["B", "D", "Hp", "Wp"] and conv["arrived"][0]["shape"] == [2, 16, 2, 2]
    weight = next(g for g in conv["made"] if g["of"] == "embed.proj.weight")
    config = RunRequest(image=16, patch=8, d_model=16, heads=2).checked().config
    model, _, pixels = image_models(config, "cpu")
    model(pixels).sum().backward()   # the same model, untraced
    grad = model.embed.proj.weight.grad
    assert (weight["shape"], weight["stride"]) == (list(grad.shape), list(grad.stride())) == ([16, 3, 8, 8],
                                                                                            [192, 64, 8, 1])
    assert "at_2T" not in backward   # an image's tokens come from its size: no 2T run


def test_run_backward_says_why_a_decode_has_no_backward():
    proc = cli_in_process("run", "--backward", "--decode", "2", *SMALL)
    assert proc.returncode == 2
    assert "--backward does not apply to --decode: decoding with a KV cache is inference, its steps run without " \
           "gradients and no backward runs through the cache" in " ".join(proc.stderr.split())
