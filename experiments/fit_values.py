"""Make a policy's Q-values values without changing its moves. LBS-K bootstraps a rollout with the VDN sum
over seats of each seat's Q of its greedy move; a network trained as a classifier (experiments/imitation.py)
has logits there. This fits the dueling value stream alone (QHead.value, every other weight frozen) so that
the sum predicts the points still to come in the network's own greedy games (Monte Carlo regression on fresh
games). The value stream adds one number to every move of a state, so the greedy moves stay the network's; the
script checks that on the evaluation deals and says how many moves changed (float rounding can flip a tie).

    python experiments/fit_values.py runs/imitation.pt --save runs/imitation_values.pt --minutes 10
    python experiments/leaf_values.py runs/imitation_values.pt --games 1000      # then measure it

Writes a blueprint checkpoint (config, game, the fitted weights, and what was fitted) that every entry point
loads. The clock is this process's CPU time (with one torch thread, core-minutes).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from lbs import ckpt
from lbs.hanabi import public_features
from lbs.models import load_blueprint
from lbs.models.io import BLUEPRINT_KIND
from lbs.rl.actors import ActorConfig, run_round
from lbs.rl.r2d2 import players_as_rows, rows_as_players
from lbs.seeding import Stream, game_seeds

if __package__:
    from .leaf_values import returns_to_go
else:
    from leaf_values import returns_to_go


def greedy_values(net, game, eps: dict[str, torch.Tensor]) -> torch.Tensor:
    """[N, T] the VDN sum over seats of each seat's Q of the move it made, in recorded greedy games; only the
    value stream carries a gradient (the trunk runs once, without one)."""
    priv = players_as_rows(eps["priv"].float())
    legal = players_as_rows(eps["legal"])
    feats = {}
    hook = net.head.register_forward_hook(lambda mod, inp, out: feats.update(o=inp[0]))
    with torch.no_grad():
        net(priv, public_features(game, priv), legal, net.initial_state(priv.shape[0], priv.device))
    hook.remove()
    q = rows_as_players(net.head(feats["o"], legal), eps["legal"].shape[0])  # [N, T, P, A]
    return q.gather(-1, eps["action"].long()[..., None]).squeeze(-1).sum(-1)


def fit(path: str, minutes: float, games: int, lr: float, seed: int) -> tuple[dict, list[dict]]:
    """The fitted network's blueprint payload and the loss per round."""
    blob = ckpt.load(path, BLUEPRINT_KIND, map_location="cpu")
    game, net = load_blueprint(path)
    if getattr(net.head, "value", None) is None:
        raise ValueError(f"{path}: a network with no value stream (NetConfig.dueling false): nothing to fit")
    net.requires_grad_(False)
    net.head.value.requires_grad_(True)
    opt = torch.optim.Adam(net.head.value.parameters(), lr=lr)
    actor = ActorConfig(num_games=games, max_len=0)
    rounds, start, spent = [], 0, 0.0
    while spent < 60 * minutes:
        t0 = time.process_time()
        seeds = game_seeds(Stream.BLUEPRINT_TRAIN, seed, games, start=start)
        start += games
        with torch.no_grad():
            eps, stats = run_round(game, net.step, net.initial_state, seeds, 0, actor)
        mask = eps["mask"]
        target = returns_to_go(eps["reward"].float(), 1.0)
        values = greedy_values(net, game, eps)
        if not rounds:  # first, the mean error in one step: every seat's value bias takes its share of it
            with torch.no_grad():
                net.head.value.bias += (target - values)[mask].mean() / game.players
            values = greedy_values(net, game, eps)
        loss = (values - target).pow(2)[mask].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        spent += time.process_time() - t0
        rounds.append({"games": start, "loss": loss.item(), "score": float(stats["score"].float().mean()),
                       "cpu_seconds": spent})
        print(f"{spent / 60:5.1f} CPU-min  {start:6d} games  squared error {rounds[-1]['loss']:8.3f}  "
              f"score {rounds[-1]['score']:.2f}", flush=True)
    net.requires_grad_(False)
    payload = {"config": blob["config"], "game": blob.get("game", blob["config"]["game"]),
               "model": net.state_dict(),
               "fitted_values": {"from": str(path), "games": start, "minutes": minutes, "lr": lr,
                                 "loss": rounds[-1]["loss"] if rounds else None}}
    return payload, rounds


def moves_changed(before: str, after: dict, games: int) -> tuple[int, int]:
    """(moves that differ, moves made) between the two networks' greedy play on the evaluation deals."""
    game, a = load_blueprint(before)
    _, b = load_blueprint(before)
    b.load_state_dict(after["model"])
    seeds = game_seeds(Stream.EVAL, 0, games)
    actor = ActorConfig(num_games=games, max_len=0)
    with torch.no_grad():
        ea, _ = run_round(game, a.step, a.initial_state, seeds, 0, actor)
        eb, _ = run_round(game, b.step, b.initial_state, seeds, 0, actor)
    mask = ea["mask"][..., None].expand_as(ea["action"])
    return int((ea["action"] != eb["action"])[mask].sum()), int(mask.sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("blueprint", help="a blueprint checkpoint (a network with a value stream)")
    ap.add_argument("--save", required=True, metavar="PATH", help="the fitted blueprint's file (a new one)")
    ap.add_argument("--minutes", type=float, default=10.0, help="CPU minutes of fitting")
    ap.add_argument("--games", type=int, default=256, help="fresh greedy self-play games per update")
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-games", type=int, default=200, help="evaluation deals the moves are compared on")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if Path(args.save).exists():
        sys.exit(f"fit_values: --save {args.save} exists; choose another path")
    if not args.minutes > 0 or args.games < 1 or not args.lr > 0 or args.check_games < 1:
        sys.exit("fit_values: --minutes and --lr must be > 0, --games and --check-games >= 1")
    torch.set_num_threads(args.threads)
    try:
        payload, _ = fit(args.blueprint, args.minutes, args.games, args.lr, args.seed)
    except (ckpt.CheckpointError, ValueError) as e:
        sys.exit(f"fit_values: {e}")
    changed, made = moves_changed(args.blueprint, payload, args.check_games)
    payload["fitted_values"]["moves_changed"] = [changed, made]
    ckpt.save(args.save, BLUEPRINT_KIND, payload)
    print(f"fit_values: {changed} of {made} greedy moves changed on {args.check_games} evaluation deals; "
          f"written {args.save}")


if __name__ == "__main__":
    main()
