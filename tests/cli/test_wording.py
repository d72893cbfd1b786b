"""Small untruths of issue 35, each with the wording that replaced it (one test per sentence)."""

from __future__ import annotations

from conftest import cli_in_process

from shapetrace.engine.sentences import _swap_words


def test_a_llama_preset_says_its_projections_have_no_biases():
    """meta-llama/Meta-Llama-3-8B config.json: attention_bias false; 2·4096² + 2·4096·1024 = 41,943,040."""
    proc = cli_in_process("run", "--preset", "llama3-8b", "--device", "meta", "--width", "300")
    assert proc.returncode in (0, 1), proc.stderr
    text = " ".join(proc.stdout.split())
    assert ("llama3-8b has no biases in its attention projections; the model traced here has 10,240, so its "
            "41,953,280 parameters are 41,943,040 in llama3-8b.") in text
    gpt2 = " ".join(cli_in_process("run", "--preset", "gpt2", "--width", "300").stdout.split())
    assert "no biases" not in gpt2   # openai-community/gpt2 has c_attn and c_proj biases


def test_two_axes_of_one_name_are_told_apart_by_position():
    """``scores.transpose(-2, -1)`` on [B, H, T, T] (nanoGPT's self-attention scores) said "swaps T and T"."""
    assert _swap_words("T", "T", 3, 2) == "swaps the two T axes, 2 and 3"
    assert _swap_words("H", "H", 1, 1) == "swaps H with itself: nothing moves"
    assert _swap_words("H", "T", 1, 2) == "swaps H and T"


def test_run_usage_advertises_no_argument():
    proc = cli_in_process("run", "--help")
    usage = next(line for line in proc.stdout.splitlines() if "Usage:" in line)
    assert usage.split("Usage:")[1].split() == ["shapetrace", "run", "[OPTIONS]"]
    proc = cli_in_process("run", "--nope")
    assert proc.returncode == 2 and "[shape|strides]" not in proc.stderr


def test_one_copy_of_several_is_one():
    from shapetrace.render.table import _hidden_sentence

    assert _hidden_sentence([(10, 2048)], 8).startswith("1 of the 8 copies (2 KiB) is torch's, not the code's")
    assert _hidden_sentence([(10, 2048), (12, 2048)], 8).startswith("2 of the 8 copies (4 KiB) are torch's")


def test_a_layer_of_one_op_folds_to_one_number(tmp_path):
    """The Annotated Transformer's ``clones()``: identical layers in an nn.ModuleList, one linear each."""
    script = tmp_path / "clones.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\n\nclass Stack(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.linears = nn.ModuleList([nn.Linear(16, 16) for _ in range(2)])\n\n"
        "    def forward(self, x):\n        for layer in self.linears:\n            x = layer(x)  # (B, T, D)\n"
        "        return x\n\n\nStack()(torch.randn(2, 4, 16))\n")
    out = cli_in_process("trace", str(script), "--width", "120").stdout
    assert "    1 linears.1: the same op as linears.0" in out.splitlines()
    assert "1-1 " not in out and "the same 1 op" not in out


def test_the_square_test_exercise_says_the_shape_is_right_at_every_size():
    from shapetrace.exercises.content import load

    text = (load().exercise("test-split-square").folder / "exercise.toml").read_text()
    assert "its shape is right at every size, T == H included" in text and "with T == H its shape" not in text
