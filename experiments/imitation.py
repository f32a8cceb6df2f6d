"""How fast can the public-LSTM network learn SmartBot's moves on this CPU? The ceiling of every way of
learning from SmartBot's games (the demonstration replay, the warm start): plain supervised learning.

    python experiments/imitation.py --minutes 20 --record demo_net_2p

    python experiments/imitation.py --preset gpu --device cuda --batch-size 256 --chunk 4096 --minutes 8

Trains the network of a blueprint preset (`demo`, the default; `gpu` or `paper`: the paper-size network) by
cross-entropy on the moves of fresh SmartBot games (the network's Q-values read as logits over the legal
moves; every game is new, so nothing is memorised), and at every --eval-every minutes measures its greedy
agreement with SmartBot's moves on held-out SmartBot games (the evaluation deals) and the greedy self-play
score of the network alone. The clock, evaluations left out, is this process's CPU time on a CPU device
(with one torch thread, core-minutes) and wall time on a GPU; both are recorded.
Writes experiments/results/imitation/imitation_<date>_NAME.{md,png} with --record NAME. With --save PATH
the network is written (atomically, at every measurement and at the end) as a blueprint checkpoint that
every entry point loads (`search/run.py --blueprint PATH`, `train/score.py PATH`), carrying the optimizer and
the curve so far; `--resume PATH` continues that run, its curve included, for --minutes more (with a new
--lr, --dagger or --bomb-weight where given again).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import math
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from lbs import ckpt
from lbs.configs import to_dict
from lbs.hanabi import GameConfig, public_features
from lbs.hanabi.engine import tables
from lbs.models import make_qnet, resolve_device
from lbs.models.io import BLUEPRINT_KIND
from lbs.rl.config import PRESETS
from lbs.rl.demos import agreement_by_kind, record_demos
from lbs.rl.r2d2 import (
    double_q_bootstrap,
    gather_actions,
    masked_huber_loss,
    n_step_targets,
    players_as_rows,
    rows_as_players,
    td_errors,
    vdn_sum,
)
from lbs.scoring import evaluate
from lbs.seeding import Stream

if __package__:
    from .common import machine, result_path, write_result
    from .compare_curves import SMARTBOT_2P
else:
    from common import machine, result_path, write_result
    from compare_curves import SMARTBOT_2P

NAME = "imitation"
KEPT = ("preset", "hidden", "lr", "batch_size", "chunk", "held_out", "score_games", "players", "seed",
        "td_weight", "dagger", "bomb_weight", "counting", "hint_facts", "discard_facts")
"""The settings a resumed run keeps from its checkpoint (the network, the learning, the measurements)."""
RETUNABLE = {"lr": 1e-3, "dagger": 0.0, "bomb_weight": 0.0}
"""Of those, the ones a resume may change by naming the flag again (the learning's knobs, not its shapes),
with their defaults: their flags default to None, so a flag given (in any form argparse takes) shows."""
CLOCKS = {"cpu_min": "CPU minutes", "wall_min": "wall minutes"}
"""A measurement's clocks: --minutes counts the first on a CPU device, the second on a GPU."""


def bombing_plays(game: GameConfig, priv: torch.Tensor, own_hand: torch.Tensor) -> torch.Tensor:
    """[..., A] bool: the play moves that would lose a life, from observations priv [..., D] (the fireworks)
    and the true own cards own_hand [..., H] (card id, -1 for an empty slot): a training target, as the
    auxiliary head's, never an input."""
    tb, c, r, h = tables(game, priv.device), game.colors, game.ranks, game.hand_size
    top = game.layout.view(priv, "board.fireworks").reshape(*priv.shape[:-1], c, r)
    height = (top * torch.arange(1, r + 1, device=priv.device, dtype=top.dtype)).sum(-1).long()  # [..., C]
    card = own_hand.long().clamp(min=0)
    playable = tb.card_rank[card] == height.gather(-1, tb.card_color[card])
    bomb = torch.zeros(*priv.shape[:-1], game.num_actions, dtype=torch.bool, device=priv.device)
    bomb[..., game.play_move(0): game.play_move(h)] = (own_hand >= 0) & ~playable
    return bomb


def imitation_loss(net, batch: dict[str, torch.Tensor], game: GameConfig, target=None, td_weight: float = 0.0,
                   gamma: float = 0.999, n: int = 3, bomb_weight: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy of the demonstrator's move under softmax(Q) over the legal moves, on the steps
    where a seat moves (the waiting seats' no-op is their only legal action and carries nothing). With a
    target network and td_weight > 0, plus td_weight times the learner's n-step double-Q TD loss (VDN sum,
    no-ops included) on the same games, so that Q also predicts the return (values, not only logits). With
    bomb_weight > 0, plus bomb_weight times -log P(no losing play) at the same steps (bombing_plays)."""
    legal = batch["legal"]
    b, t, p, a = legal.shape
    priv = players_as_rows(batch["priv"].float())
    legal_rows, act = players_as_rows(legal), players_as_rows(batch["action"]).long()
    steps = players_as_rows(batch["mask"][..., None].expand(b, t, p))
    moving = players_as_rows(legal[..., : a - 1].any(-1)) & steps
    publ = public_features(game, priv)
    q = net(priv, publ, legal_rows, net.initial_state(priv.shape[0], priv.device))[0]
    ce = F.cross_entropy(q.masked_fill(~legal_rows, -1e9).reshape(-1, a), act.reshape(-1), reduction="none")
    m = moving.reshape(-1).float()
    loss = (ce * m).sum() / m.sum().clamp_min(1)
    if bomb_weight:  # -log P(no losing play): the one error SmartBot almost never makes, and the costliest
        logits = q.masked_fill(~legal_rows, -1e9)
        bomb = players_as_rows(bombing_plays(game, batch["priv"].float(), batch["own_hand"]))
        safe = torch.logsumexp(logits.masked_fill(bomb, -1e9), -1) - torch.logsumexp(logits, -1)
        safe = safe.clamp(min=-30)  # log P(no losing play); -30: no legal move is safe (never in Hanabi)
        loss = loss - bomb_weight * (safe.reshape(-1) * m).sum() / m.sum().clamp_min(1)
    if target is None or td_weight == 0:
        return loss
    with torch.no_grad():
        hid = target.initial_state(priv.shape[0], priv.device)
        target_q = rows_as_players(target(priv, publ, legal_rows, hid)[0], b)
    online_q, mask = rows_as_players(q, b), batch["mask"]
    q_taken = vdn_sum(gather_actions(online_q, batch["action"].long()))
    bootstrap = double_q_bootstrap(online_q.detach(), target_q, legal)
    td = td_errors(q_taken, n_step_targets(batch["reward"].float(), mask, bootstrap, gamma, n), mask)
    return loss + td_weight * masked_huber_loss(td, mask, td.new_ones(b))  # on the batch's device


def fresh_games(cfg, games: int, dev: torch.device, start: int, net, dagger: float) -> dict:
    """The next `games` deals of the DEMO stream, labelled with SmartBot's moves: a `dagger` share of them
    played by the network (SmartBot labels the states the network reaches), the rest SmartBot's own."""
    ours = round(dagger * games)
    parts = []
    if ours < games:
        parts.append(record_demos(cfg, games - ours, dev, start=start + ours))
    if ours:
        net.eval()
        parts.append(record_demos(cfg, ours, dev, start=start, learner=net))
        net.train()
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def run(args: argparse.Namespace, blob: dict | None = None) -> tuple[list[dict], bool]:
    """The measurements, and whether a stop (Ctrl-C, SIGTERM) ended the training before --minutes; `blob`,
    a checkpoint written by --save, to continue from."""
    cfg = PRESETS[args.preset]
    cfg = replace(cfg, game=replace(cfg.game, players=args.players), seed=args.seed,
                  net=replace(cfg.net, hidden=args.hidden or cfg.net.hidden,
                              counting=args.counting or cfg.net.counting,
                              hint_facts=args.hint_facts or cfg.net.hint_facts,
                              discard_facts=args.discard_facts or cfg.net.discard_facts))
    game, dev = cfg.game, resolve_device(args.device)
    torch.manual_seed(args.seed)
    net = make_qnet(game, cfg.net).to(dev)
    target = copy.deepcopy(net).requires_grad_(False) if args.td_weight else None
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    held = record_demos(cfg, args.held_out, dev, stream=Stream.EVAL)
    points, seen, updates, spent, wall, losses = [], 0, 0, 0.0, 0.0, []
    if blob is not None:
        net.load_state_dict(blob["model"])
        if target is not None:
            target.load_state_dict(blob.get("target", blob["model"]))
        opt.load_state_dict(blob["optimizer"])
        for group in opt.param_groups:  # a resume may set a new rate (RETUNABLE)
            group["lr"] = args.lr
        torch.set_rng_state(blob["rng"])
        points, (seen, updates, spent) = list(blob["points"]), (blob["progress"][k] for k in
                                                               ("games", "updates", "cpu_seconds"))
        wall = blob["progress"].get("wall_seconds", math.nan)  # files of the CPU clock alone: unknown
    on_cpu = dev.type == "cpu"  # the clock --minutes counts: CPU time here, wall time on a GPU

    def clock() -> float:
        return spent if on_cpu else wall

    end = clock() + args.minutes * 60

    def save() -> None:
        if args.save:
            ckpt.save(args.save, BLUEPRINT_KIND, {
                "config": to_dict(cfg), "game": game.to_dict(), "model": net.state_dict(),
                **({"target": target.state_dict()} if target is not None else {}),
                "optimizer": opt.state_dict(), "rng": torch.get_rng_state(), "points": points,
                "settings": {k: getattr(args, k) for k in KEPT},
                "progress": {"games": seen, "updates": updates, "cpu_seconds": spent, "wall_seconds": wall}})

    def measure() -> None:
        net.eval()
        with torch.no_grad():
            kinds = agreement_by_kind(game, net, held, lambda x: public_features(game, x))
            score = evaluate(game, net.step, net.initial_state, args.score_games, args.seed, device=dev)
        net.train()
        loss = float(torch.stack(losses).mean()) if losses else float("nan")
        agree = sum(row[0] for row in kinds.values()) / max(1, sum(map(sum, kinds.values())))
        points.append({"cpu_min": spent / 60, "wall_min": wall / 60, "updates": updates, "games": seen,
                       "loss": loss, "agree": agree, "score": score.mean, "sem": score.sem,
                       "bombed": score.bombed, "kinds": kinds})
        losses.clear()
        print(f"{spent / 60:6.1f} CPU-min  {wall / 60:6.1f} wall-min  {updates:6d} updates  {seen:7d} games  "
              f"loss {loss:.3f}  agreement {agree:.3f}  {score}", flush=True)
        save()

    if blob is None:
        measure()
    next_eval, stopped = clock() + args.eval_every * 60, False
    try:
        while clock() < end:
            t0, w0 = time.process_time(), time.perf_counter()
            eps = fresh_games(cfg, args.chunk, dev, seen, net, args.dagger)
            seen += args.chunk
            for i in torch.randperm(args.chunk).to(dev).split(args.batch_size):  # the CPU RNG: resumable
                loss = imitation_loss(net, {k: v[i] for k, v in eps.items()}, game, target, args.td_weight,
                                      cfg.gamma, cfg.n_step, args.bomb_weight)
                opt.zero_grad()
                loss.backward()
                if target is not None:
                    torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
                opt.step()
                updates += 1
                if target is not None and updates % cfg.target_sync == 0:
                    target.load_state_dict(net.state_dict())
                losses.append(loss.detach())
            if not on_cpu:
                torch.cuda.synchronize(dev)  # the chunk's kernels inside its wall time
            spent += time.process_time() - t0
            wall += time.perf_counter() - w0
            if clock() >= next_eval:
                measure()
                next_eval += args.eval_every * 60
    except KeyboardInterrupt:
        stopped = True
        saved = f" and the network as of the last one ({args.save})" if args.save else ""
        print(f"imitation: stopped after {clock() / 60:.1f} minutes; writing the {len(points)} "
              f"measurements so far{saved}", file=sys.stderr)
    if not stopped and points[-1]["updates"] != updates:
        measure()
    return points, stopped


KIND_NAMES = ("discards", "plays", "colour hints", "rank hints")
"""MOVE_KINDS as a report names them."""


def by_kind(point: dict) -> str:
    """A measurement's agreement per kind of SmartBot's move ("-" for a row from before it was kept)."""
    kinds = point.get("kinds")
    if not kinds:
        return "-"
    return " / ".join(f"{100 * row[0] / max(1, sum(row)):.1f}" for row in kinds.values())


def differs(point: dict) -> str:
    """Where the copy differs at a measurement: per kind of SmartBot's move, what the network did instead."""
    if not point.get("kinds"):
        return ""
    lines = ["", "Where the copy differs at the last measurement: per kind of SmartBot's move on the",
             "held-out games, the share the network's greedy move matched and, where not, the kind it chose",
             "instead (the same kind: another slot or another hint).", "",
             f"| SmartBot's move | moves | same move % | instead: {' / '.join(KIND_NAMES)} % |",
             "|---|---|---|---|"]
    for name, row in zip(KIND_NAMES, point["kinds"].values(), strict=True):
        n = max(1, sum(row))
        lines.append(f"| {name} | {sum(row)} | {100 * row[0] / n:.1f} | "
                     f"{' / '.join(f'{100 * x / n:.1f}' for x in row[1:])} |")
    return "\n".join(lines) + "\n"


def figure(points: list[dict], path, title: str, line: float | None, top: int, key: str = "cpu_min") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, xlabel = [p[key] for p in points], CLOCKS[key]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(x, [100 * p["agree"] for p in points], marker="o")
    a.set(xlabel=xlabel, ylabel="agreement with SmartBot's moves (%)", ylim=(0, 100), title="imitation")
    b.errorbar(x, [p["score"] for p in points], yerr=[p["sem"] for p in points], marker="o", label="network")
    if line is not None:
        b.axhline(line, color="gray", linestyle="--", label="SmartBot")
    b.set(xlabel=xlabel, ylabel="greedy score", ylim=(0, top), title="self-play score")
    b.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=20.0,
                    help="minutes of training, evaluations excluded (CPU time on a CPU, wall time on a GPU)")
    ap.add_argument("--eval-every", type=float, default=2.0, help="minutes between measurements (same clock)")
    ap.add_argument("--preset", default="demo", choices=[k for k, c in PRESETS.items() if c.game.colors == 5],
                    help="the blueprint preset whose network (and TD constants) are trained; gpu and paper: "
                         "the paper-size network")
    ap.add_argument("--hidden", type=int, default=0, help="network width (default: the preset's)")
    ap.add_argument("--counting", action="store_true",
                    help="the network also reads what the card counts say (NetConfig.counting: per card and "
                         "per hand slot the chance it is playable / useless / a last copy)")
    ap.add_argument("--hint-facts", action="store_true",
                    help="the network also reads what each hint it could give would say "
                         "(NetConfig.hint_facts: per partner and hint the touched cards' facts, the slots it "
                         "shows playable, what it rules out)")
    ap.add_argument("--discard-facts", action="store_true",
                    help="the network also reads every player's next discard by SmartBot's rule "
                         "(NetConfig.discard_facts: per slot whether it is that player's next discard, the "
                         "facts of the other players' cards there)")
    ap.add_argument("--lr", type=float, default=None, help=f"Adam's rate (default {RETUNABLE['lr']})")
    ap.add_argument("--batch-size", type=int, default=32, help="games (sequences) per update")
    ap.add_argument("--td-weight", type=float, default=0.0,
                    help="add this times the blueprint learner's TD loss (n-step double Q, VDN; the demo "
                         "preset's gamma, n, target sync and clip) on the same games, so Q is also a value")
    ap.add_argument("--dagger", type=float, default=None,
                    help="share of each chunk's games the network plays itself while SmartBot says what it "
                         "would have played (DAgger: the network's states, SmartBot's moves as labels; "
                         "default 0)")
    ap.add_argument("--bomb-weight", type=float, default=None,
                    help="add this times -log P(the move is no losing play) (the true own cards say which "
                         "plays lose a life): the costliest copying error weighed beyond the cross-entropy "
                         "(default 0)")
    ap.add_argument("--chunk", type=int, default=256, help="fresh SmartBot games recorded at a time")
    ap.add_argument("--held-out", type=int, default=256, help="SmartBot games the agreement is measured on")
    ap.add_argument("--score-games", type=int, default=300, help="greedy self-play games per measurement")
    ap.add_argument("--players", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda or cuda:N")
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/imitation/imitation_<date>_NAME.{md,png}")
    ap.add_argument("--out", default="runs/imitation", help="scratch folder when not recording")
    ap.add_argument("--save", default=None, metavar="PATH",
                    help="write the network (a blueprint checkpoint, with the optimizer and the curve) to "
                         "PATH at every measurement; an existing file only when it is the --resume one")
    ap.add_argument("--resume", default=None, metavar="PATH",
                    help="continue the run saved at PATH (its network, learning and measurement settings; "
                         "--lr, --dagger and --bomb-weight given again replace the file's) for --minutes "
                         "more")
    args = ap.parse_args()
    blob, changes = None, ""
    if args.resume:
        try:
            blob = ckpt.load(args.resume, BLUEPRINT_KIND, map_location="cpu")
            retuned = {k: getattr(args, k) for k in RETUNABLE if getattr(args, k) is not None}
            was = {k: blob["settings"].get(k, d) for k, d in RETUNABLE.items()}  # older files lack new knobs
            changes = ", ".join(f"{k.replace('_', '-')} {v} (was {was[k]})" for k, v in retuned.items()
                                if v != was[k])
            older = {"counting": False, "hint_facts": False, "discard_facts": False}  # older files lack them
            vars(args).update({**was, **older, **blob["settings"], **retuned})
            if not {"games", "updates", "cpu_seconds"} <= set(blob["progress"]) or "points" not in blob:
                raise KeyError("progress")
        except (ckpt.CheckpointError, OSError) as e:
            sys.exit(f"imitation: --resume {args.resume}: {e}")
        except (KeyError, TypeError):
            sys.exit(f"imitation: --resume {args.resume}: a blueprint, but not one saved by imitation --save")
    for k, d in RETUNABLE.items():  # a fresh run: the defaults of the flags not given
        if getattr(args, k) is None:
            setattr(args, k, d)
    if args.save and Path(args.save).exists() and (
            not args.resume or Path(args.save).resolve() != Path(args.resume).resolve()):
        sys.exit(f"imitation: --save {args.save} exists; choose another path (or --resume it)")
    for flag, v, low in (("--minutes", args.minutes, 0), ("--eval-every", args.eval_every, 0)):
        if not v > low:
            sys.exit(f"imitation: {flag} {v}: must be > {low}")
    for flag, v in (("--batch-size", args.batch_size), ("--chunk", args.chunk), ("--held-out", args.held_out),
                    ("--score-games", args.score_games)):
        if v < 1:
            sys.exit(f"imitation: {flag} {v}: must be >= 1")
    if args.hidden < 0 or args.lr <= 0 or args.td_weight < 0 or args.bomb_weight < 0:
        sys.exit("imitation: --hidden, --td-weight and --bomb-weight must be >= 0 and --lr > 0")
    if not 0 <= args.dagger <= 1 or (args.dagger and args.td_weight):
        sys.exit(f"imitation: --dagger {args.dagger}: must be in [0, 1], and 0 with --td-weight (the "
                 "network's games carry SmartBot's moves, not the moves made: TD targets would be wrong)")
    try:
        top = GameConfig(players=args.players).max_score
    except ValueError as e:
        sys.exit(f"imitation: --players {args.players}: {e}")
    try:
        device = resolve_device(args.device)
    except ValueError as e:
        sys.exit(f"imitation: {e}")
    if blob is not None and device.type != "cpu" and "wall_seconds" not in blob["progress"]:
        sys.exit(f"imitation: --resume {args.resume}: the file kept only CPU time (a CPU run); continue it "
                 "with --device cpu")
    out = result_path(NAME, args.record, args.out)  # refused now, not after the training
    torch.set_num_threads(args.threads)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a plain kill stops like Ctrl-C: results kept
    points, stopped = run(args, blob)
    key = "cpu_min" if device.type == "cpu" else "wall_min"
    rows = "\n".join(
        f"| {p['cpu_min']:.1f} | {p.get('wall_min', math.nan):.1f} | {p['updates']} | {p['games']} | "
        f"{p['loss']:.3f} | {100 * p['agree']:.1f} | {by_kind(p)} | {p['score']:.3f} ± {p['sem']:.3f} | "
        f"{100 * p['bombed']:.1f} |" for p in points)
    png = out.with_suffix(".png")
    first = blob["points"][-1][key] if blob else 0.0
    early = f"; stopped early, after {points[-1][key] - first:.1f} of {args.minutes} {CLOCKS[key]}" * stopped
    resumed = f"\n- resumed from {args.resume} at {first:.1f} {CLOCKS[key]} (the rows before: that run's)"
    resumed += f", with {changes}" if blob is not None and changes else ""
    resumed *= blob is not None
    line = SMARTBOT_2P if args.players == 2 else None
    title = f"imitating SmartBot ({args.players} players), {datetime.date.today()}"
    figure(points, png, title, line, top, key)
    td = f" plus {args.td_weight} x the TD loss (n-step double Q, VDN)" if args.td_weight else ""
    td += (f"; DAgger: {args.dagger:.0%} of the games played by the network, SmartBot's moves as labels"
           if args.dagger else "")
    td += (f"; plus {args.bomb_weight} x -log P(no losing play) (the true own cards say which plays lose "
           "a life)" if args.bomb_weight else "")
    width = f", hidden {args.hidden}" if args.hidden else ""
    width += ", reading the card-count facts (NetConfig.counting)" if args.counting else ""
    width += ", reading the hint facts (NetConfig.hint_facts)" if args.hint_facts else ""
    width += ", reading the discard facts (NetConfig.discard_facts)" if args.discard_facts else ""
    unit = " (cross-entropy + TD)" if args.td_weight else " (nats)"
    head = (f"| CPU minutes | wall minutes | updates | games seen | train loss{unit} | agreement % | "
            f"of SmartBot's {' / '.join(KIND_NAMES)} % | score ± s.e.m. | ")
    text = f"""# Imitating SmartBot: supervised learning of its moves ({datetime.date.today()})

- machine: {machine()}
- command: `python {" ".join(sys.argv)}`
- network: the {args.preset} blueprint preset's public-LSTM network{width};
  cross-entropy of SmartBot's move (Q as logits over the legal moves){td}, Adam lr {args.lr},
  {args.batch_size} games per update, every game fresh; agreement on {args.held_out} held-out SmartBot games
  (evaluation deals), score: greedy self-play of the network alone on {args.score_games} evaluation deals.
- line to reach: {f"SmartBot {line} (2 players, 100,000 games)" if line else "SmartBot's score for this game"}
- device: {device}; clock: {CLOCKS[key]} of training (evaluations excluded); a nan wall minute is a CPU run's
  row from before wall time was kept
- figure: {png.name}{early}{resumed}

{head}bomb-out % |
|---|---|---|---|---|---|---|---|---|
{rows}
{differs(points[-1])}"""
    write_result(text, NAME, args.record, args.out, out)


if __name__ == "__main__":
    main()
