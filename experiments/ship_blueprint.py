# ruff: noqa: E501  (the model card template below is Markdown)
"""Ship a blueprint: half-precision weights + config into checkpoints/, with a model card.

    python experiments/ship_blueprint.py runs/full/best.pt --name blueprint_2p --games 5000

Scores the fp16 weights exactly as shipped (greedy, seeds 0..games-1 of lbs.eval) and writes
checkpoints/<name>.pt (replacing any previous one) and checkpoints/<name>.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from lbs import ckpt
from lbs.configs import from_dict
from lbs.models import BLUEPRINT_KIND as KIND
from lbs.models import load_blueprint, resolve_device, training_record
from lbs.rl.trainer import TrainConfig
from lbs.scoring import evaluate

if __package__:  # python -m experiments.ship_blueprint, or imported
    from .common import machine, write_card
else:  # python experiments/ship_blueprint.py: this folder is first on the import path
    from common import machine, write_card


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--name", default="blueprint_2p")
    ap.add_argument("--games", type=int, default=5000)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--trained-on", default="", help="where it was trained (default: this machine)")
    ap.add_argument("--notes", default="")
    args = ap.parse_args()
    blob = ckpt.load(args.checkpoint, KIND)
    cfg = from_dict(TrainConfig, blob["config"])
    out = Path("checkpoints") / f"{args.name}.pt"
    payload = {"config": blob["config"], "game": blob["game"], "model": ckpt.half_state_dict(blob["model"]),
               "trained": training_record(blob), **({"fitted_values": blob["fitted_values"]}
                                                   if "fitted_values" in blob else {})}
    ckpt.save(out, KIND, payload)
    dev = resolve_device(args.device)
    game, net = load_blueprint(out, device=dev)
    with torch.no_grad():
        res = evaluate(
            game, net.step, lambda b: net.initial_state(b, dev), args.games, seed=0, batch=1000, device=dev
        )
    card = f"""# {args.name}: Hanabi blueprint ({game.players} players, {game.colors} colours x {game.ranks} ranks)

**Score: {res.mean:.2f} ± {res.sem:.2f}** (greedy self-play, {res.games} games, seeds 0..{res.games - 1} of
`python train/score.py checkpoints/{args.name}.pt --games {res.games}`); perfect {100 * res.perfect:.1f}%,
bomb-out {100 * res.bombed:.1f}%, mean length {res.mean_length:.1f} moves. Scored with the fp16 weights as shipped.

- Trained on: {args.trained_on or machine()}
{training(blob, cfg)}- Game: `{game}`
- Network: `{cfg.net}`
"""
    write_card(out, "lbs.models.load_blueprint", card, args.notes)


def training(blob: dict, cfg: TrainConfig) -> str:
    """The card's lines on how the network was trained: by R2D2 (train/blueprint.py), by imitation of SmartBot
    (experiments/imitation.py), and whether its values were refitted since (experiments/fit_values.py)."""
    rec = training_record(blob)
    lines = []
    if "counters" in rec:
        c, hist = rec["counters"], rec["history"]
        best = max(hist, key=lambda h: h["mean"]) if hist else None
        best_txt = f"{best['mean']:.2f} ± {best['sem']:.2f} at {best['updates']} updates" if best else "n/a"
        lines += [
            f"Training: {c['updates']:,} learner updates, {c['episodes']:,} self-play episodes, "
            f"{c['actor_steps']:,} actor game-steps, {c['wall_seconds'] / 3600:.2f} h wall time.",
            f"Best evaluation during training: {best_txt}.",
            f"Actors: `{cfg.actor}`",
            f"Learner: lr {cfg.lr}, Adam eps {cfg.adam_eps}, clip {cfg.grad_clip}, gamma {cfg.gamma}, "
            f"{cfg.n_step}-step double-Q, batch {cfg.batch_size} sequences, replay {cfg.replay_capacity:,} "
            f"episodes (alpha {cfg.alpha}, beta {cfg.beta}), target sync {cfg.target_sync}, actor sync "
            f"{cfg.actor_sync}, {cfg.updates_per_round} updates per self-play round.",
        ]
    if "progress" in rec:
        g, st = rec["progress"], rec["settings"]
        last = rec["points"][-1] if rec.get("points") else None
        lines.append(
            f"Training: imitation of SmartBot (experiments/imitation.py), {g['updates']:,} updates of "
            f"{st['batch_size']} games, {g['games']:,} fresh games labelled by SmartBot (DAgger's played by "
            f"the network), {g['cpu_seconds'] / 60:.0f} CPU minutes; last settings: lr {st['lr']}, DAgger "
            f"{st.get('dagger', 0.0)}, losing plays weighed "
            f"{st.get('bomb_weight', 0.0)}"
            + (f"; last agreement with SmartBot {100 * last['agree']:.1f}%." if last else "."))
    fv = blob.get("fitted_values")
    if fv:
        changed = fv.get("moves_changed")
        lines.append(
            f"Values: the dueling value stream refitted and the advantages scaled by {fv['advantage_scale']:.4f} "
            f"(experiments/fit_values.py, {fv['games']:,} games, {fv['minutes']} CPU minutes), so the VDN sum "
            f"of Q predicts the points to come"
            + (f"; {changed[0]} of {changed[1]} greedy choices changed on the evaluation deals." if changed else "."))
    return "".join(f"- {line}\n" for line in lines)


if __name__ == "__main__":
    main()
