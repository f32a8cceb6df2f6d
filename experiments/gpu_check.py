"""Everything to run first on a GPU, in one command, into one dated result file.

    python -m experiments.gpu_check                      # every step, results under runs/gpu_check/
    python -m experiments.gpu_check --only tests graphs  # some steps
    python -m experiments.gpu_check --out runs/gpu_h100  # any results folder

Where a command may run 10 minutes at most, run the steps in groups that fit (each step's limit is
below), e.g. `--only tests search`, then `--only search-10k`, then `--only sparta-10k`; without an
install, run from the repository root with `PYTHONPATH=.` (the training steps also need wandb).

Steps (each a subprocess with its own time limit, so one failure or hang does not stop the rest):
  tests    the test suite's CUDA parametrisations (captured == eager, CPU == CUDA); CI runs the rest
  env      engine step throughput, eager and torch.compile (experiments/bench_env.py)
  graphs   eager vs CUDA-graph lockstep play and actor rounds (experiments/bench_graphs.py)
  train    learner and actor throughput, fp32 and bf16 (experiments/bench_train.py)
  belief   belief sampling throughput and quality (experiments/belief_fig3.py)
  search   LBS-1 / LBS-16 / LBS-inf / SPARTA at 1,000 rollouts per move, 64 games at once, graphs on
  search-10k  LBS-16 at 10,000 rollouts per move on 64 games at once with its score (table1.py)
  sparta-10k  SPARTA at 10,000 rollouts per move, 64 games at once (target: under 5 s per game)
  table1   the shipped pair's Table 1 at delta 0.5, 1,000 rollouts, 208 deals: blueprint, LBS-16 and LBS-inf
           (64 games at once)
  table1-lbs   its LBS-32, LBS-8 and LBS-1 rows
  table1-sparta  its SPARTA row (32 games at once: 64 overflowed an H100's 80 GB before the range grew
           in chunks). With the shipped pair (its facts network, LBS drawing within SmartBot's knowledge)
           the whole table took about 12 minutes of one H200 in two commands of parallel table1 runs
           (experiments/results/table1/full_2p_df150/, the h200 records), so each step may reach its
           limit: it keeps its finished batches (journals in <out>/table1) and the same step run again on
           the same machine plays only the rest. Join the three with
           `python -m experiments.table1 --combine <out>/table1/*.json`
  smartbot    SPARTA and LBS-inf on SmartBot at 1,000 rollouts per move, 2 games, rollouts eager and captured
           (on an H200, SPARTA: 20.1 s per game eager, 5.8 captured)
  smartbot-10k  SPARTA on SmartBot at 10,000 rollouts with the reference budget, 8 games at once, captured
           rollouts: the cost per game, split into range upkeep, counterfactual filters, draws and rollouts
           (on an H200: 8.2 s per game)
  overlap  the gpu preset's updates/s with acting and learning overlapped or not (bench_train.py --loop)
  preset   7 minutes of `train/blueprint.py --preset gpu` (eager actors: captured actor rounds fail
           their CUDA test, docs/gpu.md)
  curve    that run's learning curve (experiments/curves.py): the gpu preset's first record
  recipe   the blueprint recipe at paper size (`train/blueprint.py --preset recipe-gpu`: imitation of
           SmartBot, TD values, R2D2 improvement), 8 minutes, in runs/blueprint/gpu-recipe-<date>-<time>
  recipe-resume  the newest such run resumed for 8 more minutes (run it again to go on: the curve continues)
  recipe-curve   its learning curve
Writes <out>/gpu_check_<date>_<gpu>.md (the command, machine, and per step: command, exit code, time
and the output's tail), beside every benchmark's own result file in <out>.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import torch

from experiments.common import machine

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def steps(out: Path) -> dict[str, tuple[list[str], int]]:
    """name -> (command, time limit in seconds)."""
    cuda = f"--device cuda --out {shlex.quote(str(out))}"
    search = f"-m experiments.bench_search --batch-games 64 --games 64 --cuda-graphs on {cuda}"
    smartbot = f"-m experiments.bench_search --blueprint smartbot {cuda}"
    table1 = (f"-m experiments.table1 --games 208 --rollouts 1000 --min-rollouts 50 --delta 0.5 "
              f"--max-rows 65536 --cuda-graphs --device cuda --out {shlex.quote(str(out / 'table1'))}")
    recipe = ROOT / "runs" / "blueprint" / f"gpu-recipe-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    earlier = sorted((ROOT / "runs" / "blueprint").glob("gpu-recipe-*/latest.pt"))
    newest = earlier[-1].parent if earlier else recipe
    train = "train/blueprint.py --device cuda --wandb_mode disabled --no_progress"
    plan = {
        "tests": ("-m pytest -q -rs -p no:cacheprovider --continue-on-collection-errors -k cuda tests", 180),
        "env": (f"-m experiments.bench_env --compile --batch-sizes 1024 16384 131072 --seconds 3 {cuda}",
                580),
        "graphs": (f"-m experiments.bench_graphs --games 1024 8192 --net paper {cuda}", 580),
        "train": (f"-m experiments.bench_train {cuda}", 300),
        "train-bf16": (f"-m experiments.bench_train --precision bf16-mixed {cuda}", 300),
        "belief": (f"-m experiments.belief_fig3 --belief checkpoints/belief_2p.pt --games 200 {cuda}", 580),
        "search": (f"{search} --modes lbs-16 lbs-1 lbs-inf sparta --rollouts 1000 --min-rollouts 50", 300),
        "search-10k": (f"-m experiments.table1 --modes blueprint lbs-16 --games 64 --batch-games 64 "
                       f"--rollouts 10000 --min-rollouts 100 --cuda-graphs {cuda}", 500),
        "sparta-10k": (f"{search} --modes sparta --rollouts 10000 --min-rollouts 100", 580),
        "overlap": ("-m experiments.bench_train --loop gpu --updates 200 --repeats 1 --device cuda", 580),
        "preset": (f"train/blueprint.py --preset gpu --device cuda --max_minutes 7 --wandb_mode disabled "
                   f"--out_dir {shlex.quote(str(out / 'gpu_preset'))}", 580),
        "curve": (f"-m experiments.curves {shlex.quote(str(out / 'gpu_preset'))} --out "
                  f"{shlex.quote(str(out))}", 300),
        "table1": (f"{table1} --batch-games 64 --modes blueprint lbs-16 lbs-inf", 580),
        "table1-lbs": (f"{table1} --batch-games 64 --modes blueprint lbs-32 lbs-8 lbs-1", 580),
        "table1-sparta": (f"{table1} --batch-games 32 --modes blueprint sparta", 580),
        "smartbot": (f"{smartbot} --batch-games 2 --games 2 --modes sparta lbs-inf --rollouts 1000 "
                     f"--min-rollouts 50 --cuda-graphs both", 300),
        "smartbot-10k": (f"{smartbot} --batch-games 8 --games 8 --modes sparta --rollouts 10000 "
                         f"--min-rollouts 100 --budget reference --cuda-graphs on", 300),
        "recipe": (f"{train} --preset recipe-gpu --max_minutes 8 --out_dir {shlex.quote(str(recipe))}", 580),
        "recipe-resume": (f"{train} --resume {shlex.quote(str(newest / 'latest.pt'))} --max_minutes 16", 580),
        "recipe-curve": (f"-m experiments.curves {shlex.quote(str(newest))} --record gpu_recipe --out "
                         f"{shlex.quote(str(out))}", 90),
    }
    return {name: ([PY, *shlex.split(cmd)], limit) for name, (cmd, limit) in plan.items()}


def run_step(name: str, cmd: list[str], limit: int, log: Path,
             grace: int = 30) -> tuple[int | str, float, str]:
    """(exit code or 'timeout', seconds, the output's last lines); the whole output goes to log. At its limit
    a step gets SIGTERM, and `grace` seconds to say what it kept (table1's journals), before SIGKILL."""
    t0 = time.perf_counter()
    env = {**os.environ, "WANDB_MODE": os.environ.get("WANDB_MODE", "disabled")}
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, text=True, env=env)
        try:
            code: int | str = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            code = "timeout"
            proc.terminate()
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    text = log.read_text(errors="replace")
    tail = "\n".join(text.strip().splitlines()[-40:])
    return code, time.perf_counter() - t0, tail


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", default=None, help="run these steps only (default: all)")
    ap.add_argument("--out", default="runs/gpu_check", help="folder for the results (default runs/gpu_check)")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    plan = steps(out)
    names = args.only or list(plan)
    unknown = sorted(set(names) - set(plan))
    if unknown:
        sys.exit(f"gpu_check: unknown step(s) {', '.join(unknown)}; choose from {', '.join(plan)}")
    if not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device here; run it on a machine with a GPU")
    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name().replace(" ", "_")
    report = out / f"gpu_check_{datetime.date.today()}_{gpu}.md"
    lines = [
        f"# GPU check on {torch.cuda.get_device_name()}",
        "",
        f"- Date: {datetime.datetime.now():%Y-%m-%d %H:%M}; machine: {machine()}; CUDA {torch.version.cuda}.",
        f"- Command: `python -m experiments.gpu_check {' '.join(sys.argv[1:] if argv is None else argv)}`",
        f"- Steps: {', '.join(names)}; each benchmark's own result file is in {out}.",
        "",
        "| step | exit | seconds |",
        "|---|---|---|",
    ]
    details = []
    for name in names:
        cmd, limit = plan[name]
        print(f"gpu_check: {name}: {' '.join(cmd)}", flush=True)
        code, sec, tail = run_step(name, cmd, limit, out / f"gpu_check_{name}.log")
        print(f"gpu_check: {name}: exit {code} after {sec:.0f} s", flush=True)
        lines.append(f"| {name} | {code} | {sec:.0f} |")
        details += ["", f"## {name}", "", f"`{' '.join(cmd)}` (limit {limit} s)", "", "```", tail, "```"]
        report.write_text("\n".join(lines + details) + "\n")  # after every step: a cut-off run keeps some
    print(f"written: {report}")
    return report


if __name__ == "__main__":
    main()
