# ruff: noqa: E501  (the model card template below is Markdown)
"""Ship a belief: half-precision weights + configs into checkpoints/, tied to a shipped blueprint.

    python experiments/ship_belief.py runs/belief/latest.pt --blueprint checkpoints/blueprint_2p.pt \\
        --name belief_2p --games 1000

The belief must have been trained for exactly that blueprint file (sha256), or, with --trained-for RUN.pt,
for the run checkpoint that blueprint was shipped from (its fp16 weights must equal the shipped file's;
the card says so). Scores the fp16 weights
as shipped (per-card cross-entropy of the true hand against the grounded belief, held-out games) and
writes checkpoints/<name>.pt (replacing any previous one) and checkpoints/<name>.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from lbs import ckpt
from lbs.belief.config import BeliefTrainConfig
from lbs.belief.evaluate import evaluate_belief
from lbs.configs import from_dict
from lbs.models import BELIEF_KIND as KIND
from lbs.models import is_rule_bot, load_belief, load_blueprint, resolve_device

if __package__:  # python -m experiments.ship_belief, or imported
    from .common import machine, write_card
else:  # python experiments/ship_belief.py: this folder is first on the import path
    from common import machine, write_card


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--blueprint", required=True)
    ap.add_argument("--name", default="belief_2p")
    ap.add_argument("--games", type=int, default=1000)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--trained-for", default=None, help="the run blueprint the belief was trained for, when "
                    "--blueprint is its shipped fp16 copy")
    ap.add_argument("--conventions", default="", help="the rule bot whose games the blueprint learnt from "
                    "(e.g. smartbot): LBS then draws this belief's samples within that bot's card knowledge "
                    "(BeliefModel.conventions)")
    ap.add_argument("--notes", default="")
    args = ap.parse_args()
    if args.conventions and not is_rule_bot(args.conventions):
        sys.exit(f"ship_belief: --conventions {args.conventions!r} is not a rule bot")
    dev = resolve_device(args.device)
    blob = ckpt.load(args.checkpoint, KIND)
    if args.trained_for:
        load_belief(args.checkpoint, blueprint_path=args.trained_for)  # refuses a belief for another blueprint
        _, run = load_blueprint(args.trained_for)
        _, shipped = load_blueprint(args.blueprint)
        same = all(torch.equal(v.half().float(), shipped.state_dict()[k]) for k, v in run.state_dict().items())
        if not same:
            sys.exit(f"ship_belief: {args.blueprint} is not the fp16 copy of {args.trained_for}")
        blob["blueprint"] = {"path": args.blueprint, "sha256": ckpt.file_hash(args.blueprint),
                             "trained_for": args.trained_for}
        args.notes += (f" Trained against `{args.trained_for}` (fp32), of which `{args.blueprint}` is the fp16 "
                       "copy (weights checked equal after rounding).")
    else:
        load_belief(args.checkpoint, blueprint_path=args.blueprint)  # refuses a belief for another blueprint
    cfg = from_dict(BeliefTrainConfig, blob["config"])
    out = Path("checkpoints") / f"{args.name}.pt"
    payload = {
        "config": blob["config"],
        "game": blob["game"],
        # relative to the belief file's folder, so the pair loads from any working directory
        "blueprint": {"sha256": blob["blueprint"]["sha256"],
                      "path": args.blueprint if is_rule_bot(args.blueprint) else os.path.relpath(args.blueprint, out.parent)},
        "state_dict": ckpt.half_state_dict(blob["state_dict"]),
        "global_step": blob.get("global_step"),
        "step": blob.get("step", blob.get("global_step")),
        **({"conventions": args.conventions} if args.conventions else {}),
    }
    ckpt.save(out, KIND, payload)
    game, model = load_belief(out, blueprint_path=args.blueprint, device=dev)
    _, net = load_blueprint(args.blueprint, device=dev, game=game)
    with torch.no_grad():
        res = evaluate_belief(game, model, net.step, lambda b: net.initial_state(b, dev), games=args.games, device=dev)
    turns = [t for t, n in enumerate(res.cards_by_turn) if n > 0]
    wins = sum(res.learned_by_turn[t] < res.grounded_by_turn[t] for t in turns)
    beyond = sum(res.learned_by_turn[t] < res.counting_by_turn[t] for t in turns)
    tied = ("a rule bot, taken by name: the belief loads with no other blueprint" if is_rule_bot(args.blueprint)
            else f"sha256 `{blob['blueprint'].get('sha256', '?')}`; loading with another blueprint raises")
    conventions = (f"\n- Conventions: the blueprint learnt {args.conventions}'s from its games, so LBS draws this "
                   f"belief's samples within {args.conventions}'s public card knowledge, followed from the "
                   "searcher's own observations (`SearchConfig.blueprint_knowledge`; off: "
                   "`--blueprint-knowledge false`, or table1's `--no-blueprint-knowledge`)." if args.conventions else "")
    card = f"""# {args.name}: learned belief for `{args.blueprint}`

**Cross-entropy of the true hand: {res.nll_learned:.3f} nats per card** (learned) vs {res.nll_grounded:.3f} for the
grounded belief (card counts + hints, the LBS paper's eq. 7), over {res.games} held-out greedy blueprint
games; the learned belief is lower at {wins} of {len(turns)} turns. Scored with the fp16 weights as shipped.
The counting prior alone (the same counts slot by slot, no network) scores {res.nll_counting:.3f}: the learned
belief is lower at {beyond} of {len(turns)} turns; that gap is what it learned from the blueprint's play.

- Blueprint: `{args.blueprint}` ({tied}).{conventions}
- Scored and shipped on: {machine()}; {blob.get("global_step")} optimizer steps (where they ran: the notes).
- Game: `{game}`
- Model: `{cfg.model}`
- Training: lr {cfg.lr}, batch {cfg.batch_size} streams, replay {cfg.replay_capacity} streams, explore {cfg.explore}.
"""
    write_card(out, "lbs.models.load_belief", card, args.notes)


if __name__ == "__main__":
    main()
