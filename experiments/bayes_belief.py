"""BAD's claim on our blueprints: how much the Bayesian belief (lbs.search.bayes_belief) knows of the
searcher's hand beyond the grounded V0 belief, beside the self-consistent V1 and the learned belief.

    python -m experiments.bayes_belief --games 250 --record shipped_2p

Greedy blueprint self-play on held-out deals (the EVAL stream); every seat follows its own hand with a
BayesBelief (and the learned belief, fed its observations turn by turn). At every turn and for every card a
seat holds it scores each belief on the true card: the per-card cross-entropy (nats; the learned belief's
is its autoregressive hand log-probability over the cards held, the factorised beliefs' the sum of their
slots') and, for the factorised beliefs, the per-slot entropy. It counts the true cards a belief gives
probability zero (V2 mixes V0 in, so none should), and times the Bayesian update (thread CPU time per
move per game, on the searcher's seat's moves and its partners' alike). Writes a table per turn bucket.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from experiments.common import command, machine, result_path, write_result
from lbs import ckpt, cli
from lbs.acting import Turn, play
from lbs.hanabi import engine
from lbs.hanabi.encode import own_hands
from lbs.infer import InferenceServer
from lbs.models import is_rule_bot, load_belief, load_blueprint
from lbs.search.bayes_belief import ITERATIONS, MIX, SAMPLES, TEMPERATURE, BayesBelief
from lbs.seeding import Stream, game_seeds

BUCKETS = (0, 10, 20, 30, 40, 50, 60, 200)
"""turn buckets of the per-turn table"""
KINDS = ("v0", "v1", "v2")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blueprint", default="checkpoints/blueprint_2p.pt")
    ap.add_argument("--belief", default="checkpoints/belief_2p.pt", help="the learned belief beside it")
    ap.add_argument("--games", type=int, default=250, help="held-out deals, played at once")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=SAMPLES, help="draws per partner move (the likelihood)")
    ap.add_argument("--temperature", type=float, default=TEMPERATURE,
                    help="the partner's softmax temperature in the likelihood (0: greedy, 0/1)")
    ap.add_argument("--mix", type=float, default=MIX, help="share of V0 mixed into the Bayesian belief")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/bayes_belief/bayes_belief_<date>_NAME.md")
    ap.add_argument("--out", default="runs/bayes_belief", help="scratch folder when not recording")
    args = ap.parse_args(argv)
    try:
        cli.at_least("--games", args.games, 1)
        cli.at_least("--samples", args.samples, 1)
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        if is_rule_bot(args.blueprint):
            raise ValueError(f"{args.blueprint} is a rule bot: the Bayesian belief asks a network blueprint")
        game, net = load_blueprint(args.blueprint)
        _, model = load_belief(args.belief, blueprint_path=args.blueprint, game=game)
    except (ValueError, ckpt.CheckpointError) as e:
        sys.exit(f"bayes_belief: {e}")
    out = result_path("bayes_belief", args.record, args.out)
    n, p, dev = args.games, game.players, torch.device("cpu")
    server = InferenceServer(net, dev)
    beliefs = [BayesBelief(game, server.qnet(), seat, samples=args.samples,
                           temperature=args.temperature, mix=args.mix) for seat in range(p)]
    seeds = game_seeds(Stream.EVAL, args.seed, n, 0, dev)
    state = engine.reset(game, seeds)
    for b in beliefs:
        b.reset(state)
    bhid = model.initial_state(n * p, dev)
    sums: dict[str, torch.Tensor] = {k: torch.zeros(len(BUCKETS) - 1, dtype=torch.float64) for k in (
        *(f"ce_{k}" for k in KINDS), "ce_learned", *(f"h_{k}" for k in KINDS), "cards",
        *(f"zero_{k}" for k in KINDS))}
    clock = {"seconds": 0.0, "game_moves": 0}
    states = 0

    def score(turn: Turn) -> None:
        """Every belief on every seat's true cards as the turn begins, then the Bayesian update."""
        nonlocal bhid, states
        st = turn.state
        own = own_hands(game, st)  # [N, P, H]: the test reads the true hands, the beliefs never do
        held = (own >= 0) & ~st.done[:, None, None]
        context, bhid = model.encode(turn.obs.reshape(n * p, -1).float()[:, None], bhid)
        learned = model.hand_log_prob(context[:, 0], own.reshape(n * p, -1)).reshape(n, p, -1).double()
        bucket = sum(turn.t >= b for b in BUCKETS[1:-1])
        sums["ce_learned"][bucket] -= float(torch.where(held, learned, 0.0).sum())
        sums["cards"][bucket] += float(held.sum())
        states += int((held.any(-1)).sum())
        for seat, b in enumerate(beliefs):
            hold = held[:, seat]
            for k in KINDS:
                m = b.marginals(k)  # [N, H, T]
                at = m.gather(2, own[:, seat].clamp(min=0)[..., None]).squeeze(2)
                nll = torch.where(hold & (at > 0), -at.clamp(min=1e-300).log(), 0.0)  # zeros counted apart
                sums[f"ce_{k}"][bucket] += float(nll.sum())
                ent = -(m * m.clamp(min=1e-300).log()).sum(-1)
                sums[f"h_{k}"][bucket] += float(torch.where(hold, ent, 0.0).sum())
                sums[f"zero_{k}"][bucket] += float((hold & (at <= 0)).sum())
        live = int((~st.done).sum())
        t0 = time.thread_time()
        for b in beliefs:
            b.update(st, turn.move, turn.next_state)
        clock["seconds"] += time.thread_time() - t0
        clock["game_moves"] += live * len(beliefs)

    with torch.no_grad():
        play(game, state, net.step, net.initial_state(n * p), game.max_steps, hook=score)
    cards = sums["cards"]
    total = {k: float(v.sum() / cards.sum()) for k, v in sums.items() if k.startswith(("ce_", "h_"))}
    less = 1 - total["ce_v2"] / total["ce_v0"]
    ms = 1000 * clock["seconds"] / max(clock["game_moves"], 1)
    lines = [
        f"# The Bayesian belief on {Path(args.blueprint).name} ({game.players} players)", "",
        f"{machine()}; {command(argv)}", "",
        f"{n} greedy self-play games of the EVAL stream (seed {args.seed}), every seat followed by its own "
        f"BayesBelief ({args.samples} draws per partner move, {ITERATIONS} self-consistency iterations, "
        f"V0 mix-in {args.mix:g}, temperature {args.temperature:g}) and by the learned belief "
        f"{Path(args.belief).name}; {states:,} (game, seat, "
        f"turn) states, {int(cards.sum()):,} cards held.", "",
        "Per-card cross-entropy of the true card (nats; a card a belief gives probability zero adds nothing "
        "and is counted below) and per-slot entropy, by turn:", "",
        "| turns | cards | CE V0 | CE V1 | CE V2 (Bayes) | CE learned | H V0 | H V1 | H V2 |",
        "|---|---|---|---|---|---|---|---|---|"]
    for i in range(len(BUCKETS) - 1):
        c = float(cards[i])
        if c == 0:
            continue
        cell = [f"{float(sums[k][i]) / c:.3f}" for k in ("ce_v0", "ce_v1", "ce_v2", "ce_learned", "h_v0",
                                                            "h_v1", "h_v2")]
        lines.append(f"| {BUCKETS[i]}-{BUCKETS[i + 1] - 1} | {int(c):,} | " + " | ".join(cell) + " |")
    lines.append("| all | {:,} | {} |".format(int(cards.sum()), " | ".join(
        f"{total[k]:.3f}" for k in ("ce_v0", "ce_v1", "ce_v2", "ce_learned", "h_v0", "h_v1", "h_v2"))))
    lines += ["", f"- Cross-entropy of V2 against V0: {100 * less:.1f}% less (BAD's Fig. 4c: about 40%).",
              "- True cards given probability zero: " + ", ".join(
                  f"{k.upper()} {int(sums[f'zero_{k}'].sum()):,}" for k in KINDS) + ".",
              f"- The Bayesian update: {ms:.2f} ms of CPU per move per game, for one seat's belief "
              f"({clock['game_moves']:,} updates, {args.samples} draws per partner move).", ""]
    write_result("\n".join(lines), "bayes_belief", args.record, args.out, out)


if __name__ == "__main__":
    main()
