"""Why does LBS help or hurt a blueprint? The same search with the true hand instead of belief samples
(an oracle: it peeks, so only a diagnostic, and needs no belief) or with another delta, paired with the
blueprint.

    python experiments/diagnose_lbs.py --sampler true --delta 0.05 --games 64    # the search machinery alone
    python experiments/diagnose_lbs.py --sampler belief --delta 0.5 --games 64   # fewer noisy deviations
    python experiments/diagnose_lbs.py --plays --games 200                       # rate the blueprint's plays
    python experiments/diagnose_lbs.py --deviations \
        experiments/results/search/lbs16_10k_full_2p_2026-11-22.json

--plays searches nothing: in blueprint self-play, at every play the searching seat's blueprint makes, it
compares how often the card turns out playable with the probability the learned belief (the share of its
samples) and the counting prior (unseen copies allowed by the hints) give the played slot being playable.
A belief that rates the blueprint's plays lower than they succeed makes search replace plays by discards.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from lbs import cli
from lbs.acting import Turn, play
from lbs.ckpt import CheckpointError
from lbs.hanabi import PLAY, engine
from lbs.hanabi.encode import own_hand_facts
from lbs.hanabi.rng import hash_keys
from lbs.models.io import shipped_belief
from lbs.search.agent import play_games
from lbs.search.config import SearchConfig
from lbs.search.report import summarize_run
from lbs.search.samplers import LearnedBelief, TrueHand
from lbs.search.setup import build_search
from lbs.seeding import Stream, game_seeds

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="lbs-1", help="the search mode (--plays uses the belief alone)")
    ap.add_argument("--sampler", choices=("true", "belief"), default="belief")
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--games", type=int, default=64)
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--min-rollouts", type=int, default=50)
    cli.add_blueprint_args(ap, ROOT / "checkpoints" / "blueprint_2p.pt")
    ap.add_argument("--belief", default=None,
                    help="the belief (default: the one shipped with a shipped blueprint or rule bot)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--plays", action="store_true", help="rate the blueprint's plays; no search")
    ap.add_argument("--samples", type=int, default=128, help="belief samples per play (--plays)")
    ap.add_argument("--deviations", metavar="JSON", help="count a search/run.py result's deviations by kind")
    args = ap.parse_args()
    if args.deviations:
        return count_deviations(args.deviations)
    try:  # one line naming the flag or the file, before any game is played
        cli.at_least("--games", args.games, 1)
        cli.at_least("--samples", args.samples, 1)
        cli.threads(args.threads)
        cfg = SearchConfig(rollouts=args.rollouts, min_rollouts=args.min_rollouts, delta=args.delta)
        oracle = args.sampler == "true" and not args.plays  # the true hand: no belief to load
        if not oracle:
            args.belief = args.belief or shipped_belief(args.blueprint, ROOT / "checkpoints", args.players)
        if args.plays and args.belief is None:
            raise ValueError(f"--plays rates a belief: pass --belief (none is shipped for {args.blueprint})")
        setup = build_search("blueprint" if args.plays else args.mode, args.blueprint, args.belief, cfg=cfg,
                             players=args.players,
                             make_sampler=(lambda game: TrueHand(game, cfg.seat)) if oracle else None)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"diagnose_lbs: {e}")
    if args.threads:
        torch.set_num_threads(args.threads)
    game = setup.game
    if args.plays:
        with torch.no_grad():
            return rate_plays(game, setup.server, args.games, args.samples, knowledge=setup.rule_knowledge)
    with torch.no_grad():
        t0 = time.perf_counter()
        res = play_games(setup, args.games, 0, 64)
        seconds = time.perf_counter() - t0
        base = play_games(setup.blueprint_only(), args.games, 0, 64)
    print(f"{args.mode}, sampler {args.sampler}, delta {args.delta}:")
    for line in summarize_run(args.mode, res, base, seconds, game.max_score).lines():
        print(line)


def rate_plays(game, server, games: int, k: int, seat: int = 0, knowledge=None) -> None:
    """Blueprint self-play on the evaluation deals; at each play by `seat`: did it score, and how likely did
    the learned belief and the counting prior make it (the played slot holding a playable card)? With
    `knowledge` (a rule bot's card knowledge: the blueprint's own, or that of the conventions it learnt), also
    the belief drawn within it, as LBS draws by default."""
    tb = engine.tables(game, torch.device("cpu"))
    state = engine.reset(game, game_seeds(Stream.EVAL, 0, games))
    beliefs = [LearnedBelief(game, server, seat)]
    if knowledge is not None:
        beliefs.append(LearnedBelief(game, server, seat, knowledge))
    for belief in beliefs:
        belief.reset(state)
    scored, p_belief, p_known, p_count = [], [], [], []
    outside = torch.zeros(2, dtype=torch.long)  # held cards of the seat its knowledge rules out, held cards

    def rate(turn: Turn) -> None:  # the belief reads the state before the move, then follows it
        st, move = turn.state, turn.move
        if knowledge is not None:  # does the knowledge ever rule out the card really held?
            hand = st.hands[:, seat]
            held = (hand >= 0) & ~st.done[:, None]
            own = knowledge.own_cards(beliefs[1].known).gather(2, hand.clamp(min=0)[..., None]).squeeze(2)
            outside.add_(torch.stack([(held & ~own).sum(), held.sum()]))
        plays = (st.cur_player == seat) & ~st.done & (tb.move_type[move] == PLAY)
        if bool(plays.any()):
            idx = plays.nonzero().squeeze(1)
            slot = tb.move_info[move.index_select(0, idx), 1]
            playable = st.fireworks.index_select(0, idx)[:, tb.card_color] == tb.card_rank  # [G', T]
            true = st.hands[idx, seat, slot]
            scored.append(playable.gather(1, true[:, None]).squeeze(1))
            for belief, rates in zip(beliefs, (p_belief, p_known), strict=False):
                s = belief.sample(k, hash_keys(idx, turn.t), idx)
                drawn = s.hands[torch.arange(len(idx)), :, slot]  # [G', k]
                ok = playable.gather(1, drawn.clamp(min=0)) & s.valid
                rates.append(ok.sum(1) / s.valid.sum(1).clamp(min=1))
            unseen, allowed = own_hand_facts(game, turn.obs[idx, seat])  # [G', T], [G', H, T]
            weight = unseen.clamp(min=0) * allowed[torch.arange(len(idx)), slot]
            p_count.append((weight * playable).sum(1) / weight.sum(1).clamp(min=1))
        for belief in beliefs:
            belief.update(st, move, turn.next_state)

    blueprint = server.qnet()
    play(game, state, blueprint.step, blueprint.initial_state(games * game.players), game.max_steps,
         hook=rate)
    scored, pb, pc = torch.cat(scored).double(), torch.cat(p_belief).double(), torch.cat(p_count).double()
    pk = torch.cat(p_known).double() if p_known else None
    within = "" if pk is None else f", within the rule bot's card knowledge {100 * pk.mean():.1f}%"
    if pk is not None:
        print(f"the rule bot's card knowledge of seat {seat} ruled out the card it held in "
              f"{int(outside[0])} of {int(outside[1])} held slots (every step of every game)")
    print(f"{len(scored)} blueprint plays by seat {seat} in {games} games: scored {100 * scored.mean():.1f}%;"
          f" mean P(playable): learned belief {100 * pb.mean():.1f}% ({k} samples){within}, counting prior "
          f"{100 * pc.mean():.1f}%")
    extra = "" if pk is None else " within the knowledge: mean P % |"
    print("| P(playable) under the learned belief | plays | scored % | counting prior's mean P % |" + extra)
    print("|---|---|---|---|" + ("" if pk is None else "---|"))
    for lo in (0.0, 0.2, 0.4, 0.6, 0.8):
        sel = (pb >= lo) & ((pb < lo + 0.2) | (lo == 0.8))
        if bool(sel.any()):
            known = "" if pk is None else f" {100 * pk[sel].mean():.1f} |"
            print(f"| {lo:.1f}-{lo + 0.2:.1f} | {int(sel.sum())} | {100 * scored[sel].mean():.1f} "
                  f"| {100 * pc[sel].mean():.1f} |" + known)


def count_deviations(path: str) -> None:
    """In a search/run.py result, how often each kind of blueprint move was replaced by each kind."""
    kinds: Counter[tuple[str, str]] = Counter()
    for g in json.loads(Path(path).read_text())["games"]:
        for d in g["decisions"]:
            if d["deviated"]:
                name = {v["id"]: n.strip("(").split()[0] for n, v in d["candidates"].items()}
                kinds[name[d["blueprint"]], name[d["move"]]] += 1
    print(f"{sum(kinds.values())} deviations in {path}:")
    for (bp, chosen), n in kinds.most_common():
        print(f"  blueprint {bp} -> search {chosen}: {n}")


if __name__ == "__main__":
    main()
