"""Whole-process timings of shapetrace commands against ``python -c "import torch"``.

Each command runs REPEAT times, interleaved with the baseline so machine noise hits
both alike; we print medians and the ratio to the baseline measured in the same run.

    python benchmarks/bench_startup.py [--repeat 7] [--source]

torch is measured with the bytecode its wheel installed, so shapetrace is too: the script first
byte-compiles the package (``compileall``, into ``__pycache__``, as pip does for an installed wheel and
as Python does on the first run). Where ``PYTHONDONTWRITEBYTECODE`` is set, as on our build machines,
an editable checkout would otherwise compile every module from source on every run (about 0.12 s);
``--source`` measures that case (it deletes shapetrace's ``__pycache__`` folders first).
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = [sys.executable, "-c", "import torch"]
#: The stricter baseline: shapetrace freezes the objects torch leaves (gc.freeze(), see
#: shapetrace.cli.common.import_torch), which also spares the interpreter's collections at exit; against
#: this row, what remains is shapetrace's own work.
FROZEN = [sys.executable, "-c", "import torch, gc; gc.freeze()"]
COMMANDS = {
    "shapetrace --help": ["--help"],
    "shapetrace run --d-model 512 --heads 8": ["run", "--d-model", "512", "--heads", "8"],
    "shapetrace run --json": ["run", "--json"],
    "shapetrace run --backward": ["run", "--backward"],
    "shapetrace run --break no-key-transpose": ["run", "--break", "no-key-transpose"],
    "shapetrace run --break no-key-transpose --causal": ["run", "--break", "no-key-transpose", "--causal"],
}
#: (command, limit, kind): "ratio" is relative to import torch, "seconds" is absolute.
TARGETS = {
    "shapetrace --help": (0.35, "seconds"),
    "shapetrace run --d-model 512 --heads 8": (1.10, "ratio"),
    "shapetrace run --json": (1.10, "ratio"),
    "shapetrace run --backward": (1.5, "ratio"),   # (issue 36: the forward, its backward, and the same at 2T)
    "shapetrace run --break no-key-transpose": (1.5, "ratio"),
    "shapetrace run --break no-key-transpose --causal": (1.5, "ratio"),
}


def wall(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, of this child alone: ``os.wait4``) of one command.

    On a loaded shared machine the CPU time is the steadier of the two: waiting for a core counts in
    wall time only."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: a --break run found its bug
        raise SystemExit(f"{' '.join(cmd)} exited {os.waitstatus_to_exitcode(status)}")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--source", action="store_true", help="no bytecode: compile shapetrace from source each run")
    args = parser.parse_args()
    package = ROOT / "shapetrace"
    if args.source:
        for cache in package.rglob("__pycache__"):
            shutil.rmtree(cache)
    else:
        compileall.compile_dir(str(package), quiet=1)
    cmds = {name: [sys.executable, "-m", "shapetrace", *a] for name, a in COMMANDS.items()}
    samples: dict[str, list[tuple[float, float]]] = {"import torch": [], "import torch; gc.freeze()": [],
                                                     **{k: [] for k in cmds}}
    wall(BASELINE)  # warm the file cache once
    for _ in range(args.repeat):
        samples["import torch"].append(wall(BASELINE))
        samples["import torch; gc.freeze()"].append(wall(FROZEN))
        for name, cmd in cmds.items():
            samples[name].append(wall(cmd))
    def median(name: str, which: int) -> float:
        return statistics.median(s[which] for s in samples[name])

    base, frozen = median("import torch", 0), median("import torch; gc.freeze()", 0)
    cpu_base = median("import torch", 1)
    print(f"{'command':50s} {'median s':>9s} {'× import torch':>15s} {'× frozen':>9s}  {'CPU s':>6s} {'×':>5s}  "
          "target (wall)")
    failed = False
    for name in samples:
        med, cpu = median(name, 0), median(name, 1)
        target = TARGETS.get(name)
        verdict = ""
        if target:
            limit, kind = target
            ok = (med / base if kind == "ratio" else med) <= limit
            failed |= not ok
            verdict = f"{'≤' if ok else '>'} {limit}{'×' if kind == 'ratio' else ' s'} {'ok' if ok else 'MISSED'}"
        print(f"{name:50s} {med:9.3f} {med / base:15.2f} {med / frozen:9.2f}  {cpu:6.3f} {cpu / cpu_base:5.2f}  "
              f"{verdict}".rstrip())
    print(f"(medians of {args.repeat} interleaved runs on {os.cpu_count()} cores; shapetrace "
          f"{'compiled from source each run' if args.source else 'byte-compiled first, as an installed wheel is'})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
