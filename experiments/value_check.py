"""Are blueprints' Q-values their action values? Q(s, a) against the return of (a, then the blueprint),
for the blueprint's own move and for every other legal move, on the same held-out states (lbs.rl.values).

    python -m experiments.value_check checkpoints/blueprint_2p.pt runs/recipe/best.pt --games 500 \\
        --record recipe_vs_shipped

Each blueprint plays its own greedy games on the same held-out deals and is branched at one state per deal,
drawn the same way, into one game per legal move. The return is discounted with --gamma (the recipe's TD
learns gamma-discounted values; 1: the points to come). With --anchor A, also the share of moves on each
blueprint's own games where its greedy move is A's (how far a values phase left the policy).
Writes experiments/results/value_check/value_check_<date>_NAME.md with --record NAME.
"""

from __future__ import annotations

import argparse
import datetime
import sys

import torch

from experiments.common import machine, result_path, write_result
from lbs import ckpt, cli
from lbs.models import is_rule_bot, load_blueprint
from lbs.rl.values import value_check

COLUMNS = ("rms_own", "rms_other", "bias_own", "bias_other", "corr_own", "corr_other", "n_own", "n_other",
           "rms_adv", "corr_adv", "sign_adv", "rms_leaf_other", "rms_leaf_adv", "corr_leaf_adv",
           "sign_leaf_adv", "mean_return")
FLOORS = ("floor_own", "floor_other", "floor_adv")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("blueprints", nargs="+", help="blueprint checkpoints (networks, same game)")
    ap.add_argument("--games", type=int, default=500, help="held-out deals (one branched state each)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gamma", type=float, default=0.999, help="discount of the return (1: undiscounted)")
    ap.add_argument("--anchor", default=None, help="a blueprint whose greedy moves each one is compared with")
    ap.add_argument("--along", default=None,
                    help="a blueprint whose greedy games the states come from, the same for every one "
                    "checked (default: each one's own games)")
    ap.add_argument("--reshuffles", type=int, default=0, metavar="K",
                    help="also replay every branch on K orders of the undrawn cards: the floor columns, the "
                    "return's spread that no Q can follow (0: not measured)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/value_check/value_check_<date>_NAME.md")
    ap.add_argument("--out", default="runs/value_check", help="scratch folder when not recording")
    args = ap.parse_args()
    try:
        cli.at_least("--games", args.games, 2)
        cli.finite("--gamma", args.gamma)
        if args.reshuffles == 1 or args.reshuffles < 0:
            raise ValueError(f"--reshuffles {args.reshuffles}: must be 0 (off) or at least 2")
        if not 0 < args.gamma <= 1:
            raise ValueError(f"--gamma {args.gamma}: must be in (0, 1]")
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        nets = [load_blueprint(p) for p in args.blueprints]
        anchor = load_blueprint(args.anchor)[1] if args.anchor else None
        along = load_blueprint(args.along)[1] if args.along else None
    except (ValueError, ckpt.CheckpointError) as e:
        sys.exit(f"value_check: {e}")
    for path, (game, _) in zip(args.blueprints, nets, strict=True):
        if is_rule_bot(path):
            sys.exit(f"value_check: {path} is a rule bot: its scores are no values")
        if game != nets[0][0]:
            sys.exit(f"value_check: {path} plays {game}, {args.blueprints[0]} plays {nets[0][0]}")
    out = result_path("value_check", args.record, args.out)
    rows = []
    for path, (game, net) in zip(args.blueprints, nets, strict=True):
        got = value_check(game, net, args.games, args.seed, args.gamma, anchor=anchor, along=along,
                          reshuffles=args.reshuffles)
        rows.append((path, got))
        print(path, {k: round(v, 3) for k, v in got.items()}, flush=True)
    kept = " | moves kept (anchor's)" if anchor is not None else ""
    floor_note = "" if not args.reshuffles else f"""
  _floor_: every branch replayed on {args.reshuffles} orders of the cards not yet drawn at the branching step
  (hands and the drawn cards as dealt; the first order the deal's own), the RMS of the return's spread over
  them (of G(a) - G(own) for floor_adv): what no Q of the seats' views can get below on average (the
  unseen hands' spread adds to it), so the least rms_other / rms_adv could be."""
    where = f"the greedy game of `{args.along}`" if args.along else "each blueprint's own greedy game"
    columns = COLUMNS + (FLOORS if args.reshuffles else ())
    head = "| blueprint | " + " | ".join(columns) + kept + " |"
    table = "\n".join(
        f"| `{p}` | " + " | ".join(f"{r[c]:.0f}" if c.startswith("n_") else f"{r[c]:.3f}" for c in columns)
        + (f" | {100 * r['moves_kept']:.2f}%" if anchor is not None else "") + " |" for p, r in rows)
    text = f"""# Value check: Q(s, a) against the return of (a, then the blueprint) ({datetime.date.today()})

- machine: {machine()}
- command: `python -m experiments.value_check {" ".join(sys.argv[1:])}`
- states: one per held-out deal ({args.games} deals of the blueprint validation stream from index 2^20),
  drawn uniformly from {where};
  every legal move branched on the same deck, then each blueprint's own greedy play;
  return discounted with gamma {args.gamma}; Q is the VDN sum (the mover's Q of the move, each waiting
  seat's Q of its no-op). _own_: the blueprint's greedy move; _other_: every other legal move.
  _adv_: every other move against the own move on the same deck, Q(s, a) - Q(s, own) against G(a) - G(own)
  (the comparison a search makes); sign_adv: where the two returns differ by a point or more, the share
  that Q orders the same way. _leaf_: the same with the value LBS-1 compares moves by instead of Q(s, a):
  the move's reward plus the team's Q at the state it leads to (where the next seat sees the mover's cards).
  Each return is one deal's: the hidden cards' spread stays in every error.{floor_note}

{head}
|{"---|" * (len(columns) + 1 + (anchor is not None))}
{table}
"""
    write_result(text, "value_check", args.record, args.out, out)


if __name__ == "__main__":
    main()
