"""Are a blueprint's Q-values values? LBS-K bootstraps a rollout with the VDN sum over seats of each seat's Q
of its greedy move, so that sum must predict the blueprint's own return, not just rank its moves.

    python experiments/leaf_values.py checkpoints/blueprint_2p.pt --games 2000 --record blueprint_2p

Plays greedy self-play games on the scoring deals (seeds 0.. of the evaluation stream, as train/score.py)
and compares, per game, V_0 = sum over seats of max legal Q at the first step with the final score (mean,
spread, correlation, error), then the same at every step of every game: V_t against the points still to
come (final score - score at t), undiscounted and discounted with the run's gamma. Writes
experiments/results/leaf_values/leaf_values_<date>_NAME.md with --record NAME (else a scratch file).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import torch

from lbs import ckpt
from lbs.acting import Turn, play
from lbs.hanabi import engine
from lbs.models import load_blueprint
from lbs.seeding import Stream, game_seeds

if __package__:
    from .common import machine, result_path, write_result
else:
    from common import machine, result_path, write_result


def leaf_values(path: str, games: int, seed: int, device: torch.device) -> dict[str, torch.Tensor]:
    """Per game and step: the VDN value V [N, T], the reward [N, T], the valid-step mask [N, T] and the final
    score [N] of greedy self-play."""
    game, net = load_blueprint(path, device)
    if not getattr(net, "has_value", True):
        raise SystemExit(f"leaf_values: {path} is a rule bot; its scores are no values")
    seeds = game_seeds(Stream.EVAL, seed, games, device=device)
    state = engine.reset(game, seeds)
    low = torch.finfo(torch.float32).min
    values, rewards, masks = [], [], []

    def keep(turn: Turn) -> None:
        best = turn.q.float().masked_fill(~turn.legal, low).amax(-1)  # [N, P] each seat's greedy Q
        values.append(best.sum(-1))
        rewards.append(turn.reward.float())
        masks.append(~turn.state.done)

    with torch.no_grad():
        state, _ = play(game, state, net.step, net.initial_state(games * game.players), game.max_steps,
                        hook=keep)
    return {"value": torch.stack(values, 1), "reward": torch.stack(rewards, 1), "mask": torch.stack(masks, 1),
            "score": state.score.float()}


def returns_to_go(reward: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = sum_k gamma^k r_{t+k}: [N, T] -> [N, T] (a reverse scan over steps, every game at once)."""
    out = torch.zeros_like(reward)
    acc = torch.zeros_like(reward[:, 0])
    for t in range(reward.shape[1] - 1, -1, -1):
        acc = reward[:, t] + gamma * acc
        out[:, t] = acc
    return out


def corr(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack([a.double(), b.double()]))[0, 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("blueprint", help="a blueprint checkpoint")
    ap.add_argument("--games", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/leaf_values/leaf_values_<date>_NAME.md")
    ap.add_argument("--out", default="runs/leaf_values", help="scratch folder when not recording")
    args = ap.parse_args()
    if args.games < 2:
        sys.exit(f"leaf_values: --games {args.games}: need at least 2 games for a spread")
    out = result_path("leaf_values", args.record, args.out)  # refused now, not after the games
    try:
        blob = ckpt.load(args.blueprint, "blueprint", map_location="cpu")
    except ckpt.CheckpointError as e:
        sys.exit(f"leaf_values: {e}")
    gamma = float(blob["config"].get("gamma", 1.0))
    r = leaf_values(args.blueprint, args.games, args.seed, torch.device("cpu"))
    v0, score = r["value"][:, 0], r["score"]
    m = r["mask"]
    togo = returns_to_go(r["reward"], 1.0)[m]
    disc = returns_to_go(r["reward"], gamma)[m]
    vt = r["value"][m]
    n = args.games
    rows = [
        ("V_0 (sum over seats of greedy Q, first step)", f"{v0.mean():.3f}", f"{v0.std():.3f}"),
        ("final score", f"{score.mean():.3f}", f"{score.std():.3f}"),
        ("V_0 - final score", f"{(v0 - score).mean():+.3f}", f"{(v0 - score).std():.3f}"),
    ]
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    err, derr = vt - togo, vt - disc

    def row(name: str, e: torch.Tensor, target: torch.Tensor) -> str:
        return f"| {name} | {e.mean():+.3f} | {e.pow(2).mean().sqrt():.3f} | {corr(vt, target):.3f} |"

    text = f"""# Leaf values: {Path(args.blueprint).name} ({datetime.date.today()})

- machine: {machine()}
- command: `python {" ".join(sys.argv)}`
- games: {n} greedy self-play games, seeds 0..{n - 1} of the evaluation stream (the deals of train/score.py)
- gamma of the run: {gamma}

At the start of a game (mean and spread over games; s.e.m. of the mean score {score.std() / n ** 0.5:.3f}):

| quantity | mean | std over games |
|---|---|---|
{table}

Correlation of V_0 with the final score over games: {corr(v0, score):.3f}.

At every step of every game ({int(m.sum())} steps), V_t against the points still to come:

| target | mean V_t - target | RMSE | correlation |
|---|---|---|---|
{row("final score - score at t (undiscounted)", err, togo)}
{row(f"discounted return to go (gamma {gamma})", derr, disc)}
"""
    write_result(text, "leaf_values", args.record, args.out, out)


if __name__ == "__main__":
    main()
