"""Blueprint training throughput: actor game-steps/s and learner sequences/s.

    python experiments/bench_train.py --device auto --batch 128 --seq 80 --games 128

Learner: R2D2 updates on batches of `--batch` sequences of length `--seq` (full 2-player game, the
paper network unless --hidden is given). Actors: lockstep self-play rounds of `--games` games.
Writes experiments/results/bench_train/bench_train_<date>_<device>.md.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from dataclasses import replace
from pathlib import Path

from lbs.models import NetConfig, resolve_device
from lbs.rl.actors import ActorConfig
from lbs.rl.trainer import PRESETS, Trainer

if __package__:  # python -m experiments.bench_train, or imported
    from .common import machine, sync
else:  # python experiments/bench_train.py: this folder is first on the import path
    from common import machine, sync


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=80)
    ap.add_argument("--games", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--updates", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--precision", default="32-true")
    ap.add_argument("--out", default="experiments/results/bench_train")
    args = ap.parse_args()
    dev = resolve_device(args.device)
    cfg = replace(
        PRESETS["paper"],
        net=NetConfig(hidden=args.hidden),
        actor=ActorConfig(num_games=args.games, max_len=args.seq),
        batch_size=args.batch,
        replay_capacity=max(args.games * (args.rounds + 1), args.batch),
        min_replay=1,  # the warm-up round below fills it
        device=str(dev),
        precision=args.precision,
        out_dir="/tmp/lbs_bench_train",
        wandb_mode="disabled",
    )
    tr = Trainer(cfg, progress=False)
    tr.selfplay.act_round()  # warm-up and fill
    sync(dev)
    t0, steps0 = time.perf_counter(), tr.counters["actor_steps"]
    for _ in range(args.rounds):
        tr.selfplay.act_round()
    sync(dev)
    t_act = time.perf_counter() - t0
    actor_steps = tr.counters["actor_steps"] - steps0
    slots = args.rounds * args.games * args.seq
    tr.update()
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(args.updates):
        tr.update()
    sync(dev)
    t_learn = time.perf_counter() - t0
    tr.selfplay.close()
    act_sps = actor_steps / t_act
    slot_sps = slots / t_act
    seq_s = args.updates * args.batch / t_learn
    ep_bytes = tr.replay.bytes_per_episode()
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    cmd = "python " + " ".join(sys.argv)
    text = f"""# bench_train {stamp}

- machine: {machine()}
- command: `{cmd}`
- network: public-LSTM, hidden {args.hidden}; batch {args.batch} sequences x {args.seq} steps; 2 players

| measure | value |
|---|---|
| actor game-steps/s (live games only, greedy/eps acting incl. encoding) | {act_sps:,.0f} |
| actor step slots/s (incl. finished games idling to the round end) | {slot_sps:,.0f} |
| learner sequences/s (forward+backward+Adam, target net, priorities) | {seq_s:,.1f} |
| learner updates/s | {args.updates / t_learn:,.2f} |
| replay bytes per stored episode | {ep_bytes:,} |

Reference anchor: ~1,700 trained sequences/s on a multi-GPU, 80-thread machine (reference code).
"""
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"bench_train_{stamp[:10]}_{dev.type}.md").write_text(text)


if __name__ == "__main__":
    main()
