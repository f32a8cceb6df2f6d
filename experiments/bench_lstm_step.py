"""One LSTM step of the shipped blueprint's public LSTM: torch's fused layer (oneDNN on CPU, cuDNN on CUDA)
against the explicit cells every one-step call now runs (lbs.models.qnet.lstm_cells), at the row counts
acting and search use. A search rollout batch steps 2 x --max-rows rows (two seats); the baseline is
measured in the same run, the two interleaved call by call (medians), so a shared machine's load falls
on both alike.

    python -m experiments.bench_lstm_step --rows 256 2048 16384 --threads 1
    python -m experiments.bench_lstm_step --device cuda --rows 2048 16384 65536    # on a GPU

Writes experiments/results/bench_lstm_step/bench_lstm_step_<date>_NAME.md with --record NAME, else a
scratch file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from experiments.common import command, machine, result_path, write_result
from lbs.ckpt import CheckpointError
from lbs.models import load_blueprint, resolve_device
from lbs.models.qnet import lstm_cells

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[256, 2048, 16384])
    ap.add_argument("--calls", type=int, default=200_000, help="rows stepped per setting (sets the repeats)")
    ap.add_argument("--blueprint", default=str(ROOT / "checkpoints" / "blueprint_2p.pt"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="runs/experiments", help="scratch folder (default)")
    ap.add_argument("--record", default=None, help="write results/bench_lstm_step/..._NAME.md")
    args = ap.parse_args()
    out = result_path("bench_lstm_step", args.record, args.out)
    try:
        device = resolve_device(args.device)
        _, net = load_blueprint(args.blueprint, device=device)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"bench_lstm_step: {e}")
    if args.threads:
        torch.set_num_threads(args.threads)
    lstm = net.float().lstm
    hidden, layers = lstm.hidden_size, lstm.num_layers

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    lines = [
        "# One LSTM step: torch's fused layer vs explicit cells (lbs.models.qnet.lstm_cells)",
        "",
        f"- Machine: {machine()}; device {device}.",
        f"- Command: `{command()}`",
        f"- The shipped blueprint's public LSTM ({layers} layers x {hidden}), fp32, random inputs; median "
        "wall time per call, the two interleaved call by call.",
        "",
        "| rows | torch's layer (ms) | cells (ms) | speed-up | max abs difference of h |",
        "|---|---|---|---|---|",
    ]
    gen = torch.Generator(device=device).manual_seed(0)
    with torch.no_grad():
        for rows in args.rows:
            x = torch.randn(rows, 1, hidden, device=device, generator=gen)
            hid = tuple(torch.randn(layers, rows, hidden, device=device, generator=gen) for _ in range(2))
            ways = {"torch": lambda x=x, hid=hid: lstm(x, hid),
                    "cells": lambda x=x, hid=hid: lstm_cells(lstm, x, hid)}
            diff = (ways["torch"]()[1][0] - ways["cells"]()[1][0]).abs().max().item()
            times: dict[str, list[float]] = {k: [] for k in ways}
            for _ in range(max(5, args.calls // rows)):
                for k, f in ways.items():
                    sync()
                    t0 = time.perf_counter()
                    f()
                    sync()
                    times[k].append(time.perf_counter() - t0)
            a, b = (1e3 * statistics.median(times[k]) for k in ways)
            lines.append(f"| {rows:,} | {a:.2f} | {b:.2f} | {a / b:.2f}x | {diff:.1e} |")
            print(lines[-1], flush=True)
    write_result("\n".join(lines) + "\n", "bench_lstm_step", args.record, args.out, out)


if __name__ == "__main__":
    main()
