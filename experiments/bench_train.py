"""Blueprint training throughput: the parts (actor game-steps/s, learner sequences/s) or the whole loop with
and without acting overlapped with learning, each against its baseline measured in the same run.

    python -m experiments.bench_train --device auto --batch 128 --seq 80 --games 128 --record cpu
    python -m experiments.bench_train --loop small --updates 120 --repeats 2 --record cpu_loop
    python -m experiments.bench_train --held --weights runs/blueprint/recipe/best.pt --games 64 --repeats 3

Parts: R2D2 updates on batches of `--batch` sequences of length `--seq` (the full 2-player game, the paper
network unless --hidden is given) and lockstep self-play rounds of `--games` games. --loop PRESET: that
preset's training run from scratch to --updates learner updates, alternating TrainConfig.overlap off and on
(--repeats times each, so a change in machine load hits both), learner updates per wall-clock second of the
whole run (replay fill, acting, learning, the final latest.pt; no evaluation); the sequential loop is the
baseline. --held: the `recipe` preset's policy network (a HeldQNet), each part that needs only its moves (an
imitation update, a values-phase self-play round, DAgger games) through the whole network as the baseline
and through the policy alone, with whether the moves are the same. Writes
experiments/results/bench_train/bench_train_<date>_NAME.md with --record NAME.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from lbs.models import NetConfig, load_blueprint, resolve_device
from lbs.models.qnet import HeldQNet, make_qnet
from lbs.rl.actors import ActorConfig, run_round
from lbs.rl.config import Phase
from lbs.rl.demos import record_demos
from lbs.rl.imitation import imitation_loss
from lbs.rl.r2d2 import apex_epsilons
from lbs.rl.trainer import PRESETS, Trainer
from lbs.seeding import Stream, game_seeds

from .common import machine, result_path, sync, write_result


def parts(args: argparse.Namespace) -> str:
    dev = resolve_device(args.device)
    cfg = replace(
        PRESETS["paper"], net=NetConfig(hidden=args.hidden), actor=ActorConfig(num_games=args.games,
                                                                               max_len=args.seq),
        batch_size=args.batch, replay_capacity=max(args.games * (args.rounds + 1), args.batch),
        min_replay=1,  # the warm-up round below fills it
        device=str(dev), precision=args.precision, out_dir=tempfile.mkdtemp(prefix="bench_train_"),
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
    shutil.rmtree(cfg.out_dir, ignore_errors=True)
    seq_s = args.updates * args.batch / t_learn
    return f"""- network: public-LSTM, hidden {args.hidden}; batch {args.batch} sequences x {args.seq} steps;
  2 players; precision {args.precision}; device {dev}

| measure | value |
|---|---|
| actor game-steps/s (live games only, greedy/eps acting incl. encoding) | {actor_steps / t_act:,.0f} |
| actor step slots/s (incl. finished games idling to the round end) | {slots / t_act:,.0f} |
| learner sequences/s (forward+backward+Adam, target net, priorities) | {seq_s:,.1f} |
| learner updates/s | {args.updates / t_learn:,.2f} |
| replay bytes per stored episode | {tr.replay.bytes_per_episode():,} |

Reference anchor: ~1,700 trained sequences/s on a multi-GPU, 80-thread machine (reference code).
"""


class ThroughHeads(nn.Module):
    """A HeldQNet whose move logits come through forward_heads (Q run beside the policy and not read): the
    baseline of what imitation did before it read the policy alone."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def initial_state(self, *a):
        return self.net.initial_state(*a)

    def forward_moves(self, priv, publ, legal, hid):
        return self.net.forward_heads(priv, publ, legal, hid).logits


def timed(fn, dev, repeats: int) -> tuple[float, object]:
    """(best wall seconds of `repeats` calls of fn, its last result)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        sync(dev)
        t0 = time.perf_counter()
        out = fn()
        sync(dev)
        best = min(best, time.perf_counter() - t0)
    return best, out


def held(args: argparse.Namespace) -> str:
    """The recipe preset's policy network (NetConfig.policy_net, a HeldQNet): each part that only needs the
    moves, run through the whole network (baseline) and through its policy alone (what the trainer runs)."""
    dev = resolve_device(args.device)
    cfg = replace(PRESETS["recipe"], device=str(dev), wandb_mode="disabled")
    if args.weights:
        _, net = load_blueprint(args.weights, dev, cfg.game)
    else:
        net = make_qnet(cfg.game, cfg.net).to(dev)
    if not isinstance(net, HeldQNet):
        raise SystemExit(f"--weights {args.weights}: not a policy-network blueprint (NetConfig.policy_net)")
    weighed = next(p for p in cfg.phases if p.kind == "imitate" and p.bomb_weight)
    values = next(p for p in cfg.phases if p.kind == "values")
    demos = record_demos(cfg, cfg.batch_size, dev, start=10**6)
    games = args.games
    seeds = game_seeds(Stream.BLUEPRINT_TRAIN, 0, games, device=dev)
    base = cfg.actor.eps_base if values.eps_base is None else values.eps_base
    eps = apex_epsilons(games, base, cfg.actor.eps_alpha).to(dev)

    def update(model):  # forward + backward of the imitation loss
        net.zero_grad(set_to_none=True)
        imitation_loss(model, demos, cfg.game, weighed.bomb_weight).backward()

    def round_of(model):  # a values-phase self-play round
        with torch.no_grad():
            return run_round(cfg.game, model.step, lambda n: model.initial_state(n, dev), seeds, 0, cfg.actor,
                             eps=eps)[0]

    def dagger(model):
        return record_demos(cfg, games, dev, start=10**6, learner=model)

    parts = [(f"imitation update (batch {cfg.batch_size} sequences, forward + backward)", update,
              ThroughHeads(net), net, True),
             (f"values-phase self-play round ({games} games, eps-greedy)", round_of, net, net.mover, False),
             (f"DAgger games ({games} games played by the network, SmartBot labelling)", dagger, net,
              net.mover, False)]
    lines = [f"- network: the `recipe` preset's (`{cfg.net}`), "
             f"{'weights ' + args.weights if args.weights else 'untrained'}; device {dev}; best of "
             f"{args.repeats} per cell", "",
             "| part | whole network, s (baseline) | policy alone, s | x baseline | same moves |",
             "|---|---:|---:|---:|---|"]
    for name, part, whole, alone, learns in parts:
        net.train(learns)
        t_whole, out_whole = timed(lambda: part(whole), dev, args.repeats)  # noqa: B023 (called at once)
        t_alone, out_alone = timed(lambda: part(alone), dev, args.repeats)  # noqa: B023
        same = "—" if learns else "yes" if torch.equal(out_whole["action"], out_alone["action"]) else "NO"
        lines.append(f"| {name} | {t_whole:.3f} | {t_alone:.3f} | {t_whole / t_alone:.2f} | {same} |")
    return "\n".join(lines) + "\n"


def one_run(cfg, overlap: bool) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="bench_loop_"))
    try:
        tr = Trainer(replace(cfg, overlap=overlap, out_dir=str(out / "run")), progress=False)
        tr.evaluate = lambda games=None: None  # the final evaluation is not the loop being measured
        t0 = time.perf_counter()
        tr.run()
        wall = time.perf_counter() - t0
        return {"wall": wall, "updates_per_s": tr.counters["updates"] / wall}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def loop(args: argparse.Namespace) -> str:
    cfg = replace(PRESETS[args.loop], phases=(Phase("improve", updates=args.updates),), eval_every=10**9,
                  checkpoint_minutes=10**6, device=args.device, wandb_mode="disabled")
    rows: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for overlap in (False, True):
            res = one_run(cfg, overlap)
            rows[overlap].append(res["updates_per_s"])
            print(f"overlap={overlap}: {res['updates_per_s']:.2f} updates/s ({res['wall']:.1f} s)",
                  flush=True)
    base = statistics.mean(rows[False])
    lines = [f"- config: preset {args.loop!r} as R2D2, {args.updates} updates from scratch (replay fill "
             f"included), {cfg.actor.num_games} games x {cfg.seq_len} steps a round, "
             f"{cfg.updates_per_round} updates a round, batch {cfg.batch_size}, hidden {cfg.net.hidden}, "
             f"device {args.device}", "",
             "| loop | runs | updates/s (each run) | mean | x sequential |", "|---|---:|---|---:|---:|"]
    for overlap in (False, True):
        mean = statistics.mean(rows[overlap])
        name = "overlap (actor thread)" if overlap else "sequential (baseline)"
        each = ", ".join(f"{x:.2f}" for x in rows[overlap])
        lines.append(f"| {name} | {len(rows[overlap])} | {each} | {mean:.2f} | {mean / base:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=80)
    ap.add_argument("--games", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--updates", type=int, default=5, help="learner updates timed (--loop: of each run)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--precision", default="32-true")
    ap.add_argument("--loop", default=None, choices=sorted(PRESETS),
                    help="time this preset's whole training loop, overlap off and on, instead of the parts")
    ap.add_argument("--repeats", type=int, default=2, help="--loop: runs of each kind; --held: best of")
    ap.add_argument("--held", action="store_true",
                    help="the recipe's policy network: each part through the whole network and through its "
                    "policy alone")
    ap.add_argument("--weights", default="", help="--held: a policy-network blueprint (default: untrained)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/bench_train/bench_train_<date>_NAME.md")
    ap.add_argument("--out", default="runs/experiments", help="scratch folder when not recording")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = result_path("bench_train", args.record, args.out)
    body = loop(args) if args.loop else held(args) if args.held else parts(args)
    title = ("Training loop with and without overlap" if args.loop else
             "A policy network read alone" if args.held else "Blueprint training throughput")
    text = (f"# {title}, {time.strftime('%Y-%m-%d %H:%M')}\n\n- machine: {machine()}\n"
            f"- command: `python -m experiments.bench_train {' '.join(sys.argv[1:])}`\n{body}")
    write_result(text, "bench_train", args.record, args.out, out)


if __name__ == "__main__":
    main()
