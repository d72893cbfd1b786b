"""A whole llama3-70b-sized model on the meta device, traced: time and peak memory (issue 14, "any size").

    python benchmarks/bench_llama70b_meta.py [--repeat 5] [--layers 80] [--no-transformers]

Whole processes, run interleaved ``--repeat`` times so machine noise hits every row alike; each row is the
median wall time and the median peak resident memory (``ru_maxrss`` of that one child, from ``os.wait4``):

- ``python -c "import torch"`` and ``python -c "import torch, transformers"``: the baselines;
- tests/scripts/llama_meta.py (our torch-only Llama at 70b sizes) run by python, untraced, and under
  ``shapetrace trace`` (the whole command: table, folding and summary printed);
- transformers' LlamaForCausalLM from a LlamaConfig at 70b sizes on ``torch.device("meta")``, forward from
  token ids [1, 16], untraced and under ``shapetrace.trace``; this child also reports the forward's own
  time inside the process (build and forward apart), so the tracing cost is seen without the imports.

Ratios are to the baselines measured in the same run, never absolute times: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "llama_meta.py")
DIMS = "B=1,T=16,D=8192,H=64,H_kv=8"
SIZES = {"B": 1, "T": 16, "D": 8192, "H": 64, "H_kv": 8}


def child_hf(layers: int, traced: bool) -> None:
    """Build LlamaForCausalLM at 70b sizes on meta and run it from token ids; print timings as JSON."""
    start = time.perf_counter()
    import torch
    import transformers

    import shapetrace

    imported = time.perf_counter()
    config = transformers.LlamaConfig(hidden_size=8192, num_attention_heads=64, num_key_value_heads=8,
                                      num_hidden_layers=layers, intermediate_size=28672, vocab_size=128256,
                                      max_position_embeddings=131072, rope_theta=500000.0)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config).eval()
        ids = torch.zeros(1, 16, dtype=torch.long)                   # (B, T)
    built = time.perf_counter()
    ops = 0
    with torch.no_grad():
        if traced:
            with shapetrace.trace(dims=SIZES) as t:
                model(ids)
            ops = len(t.events)
            t.diagnostics  # noqa: B018 (the checks run once, after the forward, as the CLI does)
        else:
            model(ids)
    done = time.perf_counter()
    print(json.dumps({"import": imported - start, "build": built - imported, "forward": done - built, "ops": ops}))


def run(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MiB (this child only) and stdout of one command."""
    env = dict(os.environ, PYTHONPATH=ROOT, COLUMNS="120")
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return wall, usage.ru_maxrss / 1024, out


def commands(layers: int, with_transformers: bool) -> dict[str, list[str]]:
    py, me = sys.executable, os.path.abspath(__file__)
    layer_args = ["--layers", str(layers)]
    cmds = {
        "python -c 'import torch'": [py, "-c", "import torch"],
        "llama_meta.py untraced": [py, SCRIPT, *layer_args],
        "shapetrace trace llama_meta.py": [py, "-m", "shapetrace", "trace", SCRIPT, "--dims", DIMS, "--width", "120",
                                           "--", *layer_args],
    }
    if with_transformers:
        cmds.update({
            "python -c 'import torch, transformers'": [py, "-c", "import torch, transformers"],
            "transformers Llama untraced": [py, me, "--child", "untraced", *layer_args],
            "transformers Llama, shapetrace.trace": [py, me, "--child", "traced", *layer_args],
        })
    return cmds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layers", type=int, default=80)
    parser.add_argument("--no-transformers", action="store_true")
    parser.add_argument("--child", choices=["traced", "untraced"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_hf(args.layers, args.child == "traced")
        return 0
    with_tf = not args.no_transformers
    if with_tf:
        try:
            import transformers  # noqa: F401
        except ImportError:
            print("transformers is not installed: its rows are left out (pip install transformers)")
            with_tf = False
    cmds = commands(args.layers, with_tf)
    samples: dict[str, list[tuple[float, float, str]]] = {name: [] for name in cmds}
    run(cmds["python -c 'import torch'"])  # warm the file cache once
    for _ in range(args.repeat):
        for name, cmd in cmds.items():
            samples[name].append(run(cmd))
    report(samples, args, with_tf)
    return 0


def report(samples: dict, args, with_tf: bool) -> None:
    wall = {k: statistics.median(s[0] for s in v) for k, v in samples.items()}
    rss = {k: statistics.median(s[1] for s in v) for k, v in samples.items()}
    torch_base, tf_base = "python -c 'import torch'", "python -c 'import torch, transformers'"
    print(f"{args.layers} layers, hidden 8192, 64 heads, 8 kv heads, intermediate 28672, vocab 128256, meta, "
          f"token ids [1, 16]: medians of {args.repeat} interleaved runs on {os.cpu_count()} cores")
    print(f"{'':40s} {'wall s':>7s} {'peak RSS':>10s}   {'ratios to the baseline':s}")
    for name in samples:
        base = tf_base if "transformers" in name.lower() and name != tf_base else torch_base
        ratio = "" if name == base else f"   time {wall[name] / wall[base]:.2f}x, memory {rss[name] / rss[base]:.2f}x"
        print(f"{name:40s} {wall[name]:7.2f} {rss[name]:7.1f} MiB{ratio}")
    if with_tf:
        inner = [json.loads(s[2]) for s in samples["transformers Llama, shapetrace.trace"]]
        plain = [json.loads(s[2]) for s in samples["transformers Llama untraced"]]
        traced_fwd = statistics.median(x["forward"] for x in inner)
        plain_fwd = statistics.median(x["forward"] for x in plain)
        build = statistics.median(x["build"] for x in plain)
        ops = inner[0]["ops"]
        print(f"in process (transformers): build on meta {build:.2f} s; forward untraced {plain_fwd:.2f} s, "
              f"traced {traced_fwd:.2f} s ({ops} ops recorded, "
              f"{(traced_fwd - plain_fwd) / max(ops, 1) * 1e6:.0f} µs per op over the untraced forward)")


if __name__ == "__main__":
    sys.exit(main())
