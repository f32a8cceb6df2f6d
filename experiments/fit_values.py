"""Make a policy's Q-values values without changing its moves. LBS-K bootstraps a rollout with the VDN sum
over seats of each seat's Q of its greedy move; a network trained as a classifier (experiments/imitation.py)
has logits there, and a value stream that learning never touched. This refits the dueling value stream
(QHead.value) and one positive scale of the advantage stream (QHead.adv's weights times it), every other
weight as it was, so that the sum predicts the points still to come in the network's own greedy games: given
the trunk the sum is linear in those, so it is a least-squares fit over fresh games (a small ridge). Adding
one number to every move of a state and scaling its advantages by a positive number leave its best move as
it was, so the greedy moves stay the network's; the script checks that on the evaluation deals and says how
many moves changed (float rounding can flip a tie).

    python experiments/fit_values.py runs/imitation.pt --save runs/imitation_values.pt --minutes 10
    python experiments/leaf_values.py runs/imitation_values.pt --games 1000      # then measure it
    python experiments/fit_values.py runs/imitation.pt --save runs/dev.pt --minutes 3 --deviate 0.5

--deviate also fits the states after one random move in that share of the games (the states LBS-1 compares);
on the shipped blueprint it left its own games' fit as it was and LBS-1 still losing
(experiments/results/diagnose_lbs/lbs1_oracle_delta05_2026-11-27_discard_facts.md).

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
from lbs.acting import epsilon_greedy
from lbs.hanabi import engine, public_features
from lbs.models import load_blueprint, training_record
from lbs.models.io import BLUEPRINT_KIND
from lbs.rl.actors import ActorConfig, run_round
from lbs.rl.r2d2 import players_as_rows, rows_as_players
from lbs.seeding import Stream, game_seeds

if __package__:
    from .leaf_values import returns_to_go
else:
    from leaf_values import returns_to_go


def regressors(net, game, eps: dict[str, torch.Tensor]) -> torch.Tensor:
    """[N, T, H + 2] what the VDN sum of greedy Q is linear in, given the trunk: per step, the sum over seats
    of the head's input features, of 1 (the value stream's bias), and of the advantage of the move made
    (minus the mean over the legal moves, as QHead takes it)."""
    priv = players_as_rows(eps["priv"].float())
    legal = players_as_rows(eps["legal"])
    feats = {}
    hook = net.head.register_forward_hook(lambda mod, inp, out: feats.update(o=inp[0]))
    net(priv, public_features(game, priv), legal, net.initial_state(priv.shape[0], priv.device))
    hook.remove()
    o = feats["o"]
    a = net.head(o, legal) - net.head.value(o)  # QHead's advantages, less their mean over the legal moves
    made = a.gather(-1, players_as_rows(eps["action"]).long()[..., None]).double()
    x = torch.cat([o.double(), torch.ones_like(made), made], -1)  # [N * P, T, H + 2]
    return rows_as_players(x, eps["legal"].shape[0]).sum(2)


def one_deviation(game, n: int, share: float, gen: torch.Generator):
    """(override, after): an override for run_round that makes, in a `share` of the n games, one uniformly
    random legal move other than the seat's choice at a step drawn uniformly from the first two thirds of the
    game's longest possible length (64 of 97 moves on the full 2-player game, about its usual length), and
    after() -> [N, T] bool, the steps a fit may use: every step of a game played without deviating, and the
    steps after the deviation (the greedy play that follows it) of one that deviated."""
    step = torch.randint(0, 2 * game.max_steps // 3, (n,), generator=gen)
    step[torch.rand(n, generator=gen) >= share] = -1
    made = torch.full((n,), -1)

    def override(t: int, state, hid, move: torch.Tensor) -> torch.Tensor:
        legal = engine.legal_moves(game, state)  # [N, M] the mover's, in the true colours
        other = legal & (torch.arange(legal.shape[1], device=legal.device) != move[:, None])
        pick = epsilon_greedy(torch.zeros(other.shape, device=legal.device), other, 1.0, generator=gen)
        hit = (step == t) & ~state.done & other.any(1)
        made[hit] = t
        return torch.where(hit, pick, move)

    def after(steps: int) -> torch.Tensor:
        t = torch.arange(steps)[None]
        return (made[:, None] < 0) | (t > made[:, None])

    return override, after


def solve(xtx: torch.Tensor, xty: torch.Tensor, ridge: float, min_scale: float) -> torch.Tensor:
    """Least squares (value weights, value bias, advantage scale) with a small ridge; a scale at or below
    min_scale is held there (it must stay positive for the moves to stay) and the rest solved again."""
    eye = torch.eye(xtx.shape[0], dtype=xtx.dtype) * ridge
    eye[-2, -2] = eye[-1, -1] = 0.0  # no shrinkage of the bias or the scale
    w = torch.linalg.solve(xtx + eye, xty)
    if w[-1] > min_scale:
        return w
    rest = torch.linalg.solve(xtx[:-1, :-1] + eye[:-1, :-1], xty[:-1] - min_scale * xtx[:-1, -1])
    return torch.cat([rest, rest.new_tensor([min_scale])])


@torch.no_grad()
def fit(path: str, minutes: float, games: int, seed: int, ridge: float = 1e-3,
        min_scale: float = 1e-3, deviate: float = 0.0) -> tuple[dict, list[dict]]:
    """The fitted network's blueprint payload, and per round of games the squared error the fit so far
    would make on that round before seeing it (a held-out error). deviate: the share of games that make
    one random move (one_deviation), so the fit also sees states the network's own play never reaches,
    whose values LBS-1 compares."""
    blob = ckpt.load(path, BLUEPRINT_KIND, map_location="cpu")
    game, net = load_blueprint(path)
    if getattr(net.head, "value", None) is None:
        raise ValueError(f"{path}: a network with no value stream (NetConfig.dueling false): nothing to fit")
    h = net.head.adv.in_features
    xtx, xty = torch.zeros(h + 2, h + 2, dtype=torch.float64), torch.zeros(h + 2, dtype=torch.float64)
    actor = ActorConfig(num_games=games, max_len=0)
    rounds, start, spent, w = [], 0, 0.0, None
    gen = torch.Generator().manual_seed(seed)
    while spent < 60 * minutes:
        t0 = time.process_time()
        seeds = game_seeds(Stream.BLUEPRINT_TRAIN, seed, games, start=start)
        start += games
        override, after = one_deviation(game, games, deviate, gen) if deviate > 0 else (None, None)
        eps, stats = run_round(game, net.step, net.initial_state, seeds, 0, actor, override=override)
        mask = eps["mask"] if after is None else eps["mask"] & after(eps["mask"].shape[1])
        x, y = regressors(net, game, eps)[mask], returns_to_go(eps["reward"].double(), 1.0)[mask]
        error = float((x @ w - y).pow(2).mean()) if w is not None else float("nan")
        xtx += x.T @ x
        xty += x.T @ y
        w = solve(xtx, xty, ridge * start, min_scale)
        spent += time.process_time() - t0
        rounds.append({"games": start, "error": error, "scale": float(w[-1]),
                       "score": float(stats["score"].float().mean()), "cpu_seconds": spent})
        print(f"{spent / 60:5.1f} CPU-min  {start:6d} games  held-out squared error {error:9.3f}  "
              f"advantage scale {float(w[-1]):.4f}  score {rounds[-1]['score']:.2f}", flush=True)
    net.head.value.weight.copy_(w[:h].float()[None])
    net.head.value.bias.fill_(float(w[h]))
    net.head.adv.weight.mul_(float(w[-1]))
    net.head.adv.bias.mul_(float(w[-1]))
    payload = {"config": blob["config"], "game": blob.get("game", blob["config"]["game"]),
               "model": net.state_dict(), "trained": training_record(blob),
               "fitted_values": {"from": str(path), "games": start, "minutes": minutes,
                                 "deviate": deviate, "advantage_scale": float(w[-1]),
                                 "error": rounds[-1]["error"] if rounds else None}}
    return payload, rounds


def moves_changed(before: str, after: dict, games: int) -> tuple[int, int]:
    """(choices that differ, choices made) between the two networks' greedy play on the evaluation deals:
    every seat's action at every step of a game in play (a waiting seat's no-op included)."""
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
    ap.add_argument("--games", type=int, default=256, help="fresh greedy games per round of the fit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-games", type=int, default=200, help="evaluation deals the moves are compared on")
    ap.add_argument("--deviate", type=float, default=0.0, metavar="SHARE",
                    help="the share of games that make one random move, fitted on the states after it "
                    "(default 0: the network's own greedy games only)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if Path(args.save).exists():
        sys.exit(f"fit_values: --save {args.save} exists; choose another path")
    if not args.minutes > 0 or args.games < 1 or args.check_games < 1:
        sys.exit("fit_values: --minutes must be > 0, --games and --check-games >= 1")
    if not 0 <= args.deviate <= 1:
        sys.exit(f"fit_values: --deviate {args.deviate}: must be in [0, 1]")
    torch.set_num_threads(args.threads)
    try:
        payload, _ = fit(args.blueprint, args.minutes, args.games, args.seed, deviate=args.deviate)
    except (ckpt.CheckpointError, ValueError) as e:
        sys.exit(f"fit_values: {e}")
    changed, made = moves_changed(args.blueprint, payload, args.check_games)
    payload["fitted_values"]["moves_changed"] = [changed, made]
    ckpt.save(args.save, BLUEPRINT_KIND, payload)
    print(f"fit_values: {changed} of {made} greedy choices (every seat, every step) changed on "
          f"{args.check_games} evaluation deals; "
          f"written {args.save}")


if __name__ == "__main__":
    main()
