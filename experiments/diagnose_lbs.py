"""Why does LBS help or hurt a blueprint? The same search with the true hand instead of belief samples
(an oracle: it peeks, so only a diagnostic, and needs no belief) or with another delta, paired with the
blueprint.

    python -m experiments.diagnose_lbs --sampler true --delta 0.05 --games 64    # the search machinery alone
    python -m experiments.diagnose_lbs --sampler belief --games 64               # the same with the belief
    python -m experiments.diagnose_lbs --plays --games 200                       # rate the blueprint's plays

The search flags are search/run.py's (lbs.search.flags), at the table1 budget; both search arms print the
paired difference with the blueprint and which kinds of blueprint moves the search replaced (as run.py does).

--plays searches nothing: in blueprint self-play, at every play the searching seat's blueprint makes, it
compares how often the card turns out playable with the probability the learned belief (the share of its
samples), BAD's Bayesian belief (where the blueprint has the public/private split it asks) and the counting
prior (unseen copies allowed by the hints) give the played slot being playable. A belief that rates the
blueprint's plays lower than they succeed makes search replace plays by discards.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from lbs.acting import Turn, play
from lbs.ckpt import CheckpointError
from lbs.hanabi import PLAY, engine
from lbs.hanabi.encode import own_hand_facts
from lbs.hanabi.rng import hash_keys
from lbs.search import flags
from lbs.search.bayes_belief import BayesBelief
from lbs.search.config import Sampler
from lbs.search.play import play_games
from lbs.search.report import deviations, summarize_run
from lbs.search.samplers import LearnedBelief, TrueHand
from lbs.search.setup import BLUEPRINT
from lbs.seeding import Stream, game_seeds

ROOT = Path(__file__).resolve().parent.parent


def parser() -> flags.Parser:
    ap = flags.search_parser(__doc__, ROOT / "checkpoints", budget="table1", mode="lbs-1", games=64)
    ap.add_argument("--sampler", choices=("true", "belief"), default="belief",
                    help="where the searcher's hands come from: the true hand (an oracle: it peeks) or the "
                    "learned belief, as search/run.py draws them (default %(default)s)")
    ap.add_argument("--plays", action="store_true", help="rate the blueprint's plays; no search")
    ap.count("--samples", low=1, default=128, help="belief samples per play (--plays; default %(default)s)")
    return ap


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    try:  # one line naming the flag or the file, before any game is played
        oracle = args.sampler == "true" and not args.plays  # the true hand: no belief to load
        search = flags.read(ap, args, draws_belief=args.plays or (args.mode.sampler is Sampler.BELIEF
                                                                  and not oracle))
        if args.plays and search.belief is None:
            raise ValueError(f"--plays rates a belief: pass --belief (none is shipped for {args.blueprint})")
        if args.plays:
            search.modes = [BLUEPRINT]
        seat = search.cfg.seat
        setup = search.setup(make_sampler=(lambda game: TrueHand(game, seat)) if oracle else None)
        setup = setup.with_mode(search.modes[0])
        # --plays: the belief also drawn within SmartBot's card knowledge, as LBS draws by default
        knowledge = setup.rule_knowledge if args.plays and setup.cfg.knowledge == "smartbot" else None
    except (CheckpointError, ValueError) as e:
        sys.exit(f"diagnose_lbs: {e}")
    if args.threads:
        torch.set_num_threads(args.threads)
    game = setup.game
    if args.plays:
        with torch.no_grad():
            return rate_plays(game, setup.server, args.games, args.samples, args.seed,
                              knowledge=knowledge)
    with torch.no_grad():
        t0 = time.perf_counter()
        res = play_games(setup, args.games, args.seed, 64, first=args.first_game)
        seconds = time.perf_counter() - t0
        base = play_games(setup.blueprint_only(), args.games, args.seed, 64, first=args.first_game)
    print(f"{args.mode}, sampler {args.sampler}, delta {setup.cfg.delta}:")
    shown = None if oracle else setup.knowledge_shown  # the true hand is drawn within nothing
    for line in summarize_run(str(args.mode), res, base, seconds, game.max_score, shown,
                              None if oracle else setup.belief_shown).lines():
        print(line)
    print(deviations(res))


def rate_plays(game, server, games: int, k: int, seed: int = 0, seat: int = 0, knowledge=None) -> None:
    """Blueprint self-play on the evaluation deals; at each play by `seat`: did it score, and how likely did
    the learned belief, BAD's Bayesian belief and the counting prior make it (the played slot holding a
    playable card)? With `knowledge` (SmartBot's card knowledge: the blueprint's own, or a SmartBot's followed
    beside it), also the learned belief drawn within it, as LBS draws by default (--knowledge smartbot)."""
    tb = engine.tables(game, torch.device("cpu"))
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, games))
    beliefs = {"learned belief": LearnedBelief(game, server, seat)}
    if knowledge is not None:
        beliefs["within the knowledge"] = LearnedBelief(game, server, seat, knowledge)
    if server.qnet().capabilities.public_split:  # BAD's belief asks the blueprint about drawn hands
        beliefs["Bayesian belief"] = BayesBelief(game, server.qnet(), seat)
    for belief in beliefs.values():
        belief.reset(state)
    scored, p_count = [], []
    rated: dict[str, list[torch.Tensor]] = {name: [] for name in beliefs}
    outside = torch.zeros(2, dtype=torch.long)  # held cards of the seat its knowledge rules out, held cards

    def rate(turn: Turn) -> None:  # the beliefs read the state before the move, then follow it
        st, move = turn.state, turn.move
        if knowledge is not None:  # does the knowledge ever rule out the card really held?
            hand = st.hands[:, seat]
            held = (hand >= 0) & ~st.done[:, None]
            known = beliefs["within the knowledge"].known
            own = knowledge.own_cards(known).gather(2, hand.clamp(min=0)[..., None]).squeeze(2)
            outside.add_(torch.stack([(held & ~own).sum(), held.sum()]))
        plays = (st.cur_player == seat) & ~st.done & (tb.move_type[move] == PLAY)
        if bool(plays.any()):
            idx = plays.nonzero().squeeze(1)
            slot = tb.move_info[move.index_select(0, idx), 1]
            playable = st.fireworks.index_select(0, idx)[:, tb.card_color] == tb.card_rank  # [G', T]
            true = st.hands[idx, seat, slot]
            scored.append(playable.gather(1, true[:, None]).squeeze(1))
            for name, belief in beliefs.items():
                s = belief.sample(k, hash_keys(idx, turn.t), idx)
                drawn = s.hands[torch.arange(len(idx)), :, slot]  # [G', k]
                ok = playable.gather(1, drawn.clamp(min=0)) & s.valid
                rated[name].append(ok.sum(1) / s.valid.sum(1).clamp(min=1))
            unseen, allowed = own_hand_facts(game, turn.obs[idx, seat])  # [G', T], [G', H, T]
            weight = unseen.clamp(min=0) * allowed[torch.arange(len(idx)), slot]
            p_count.append((weight * playable).sum(1) / weight.sum(1).clamp(min=1))
        for belief in beliefs.values():
            belief.update(st, move, turn.next_state)

    blueprint = server.qnet()
    play(game, state, blueprint.step, blueprint.initial_state(games * game.players), game.max_steps,
         hook=rate)
    scored, pc = torch.cat(scored).double(), torch.cat(p_count).double()
    p = {name: torch.cat(v).double() for name, v in rated.items()}
    if knowledge is not None:
        print(f"the rule bot's card knowledge of seat {seat} ruled out the card it held in "
              f"{int(outside[0])} of {int(outside[1])} held slots (every step of every game)")
    means = ", ".join(f"{name} {100 * v.mean():.1f}%" for name, v in p.items())
    print(f"{len(scored)} blueprint plays by seat {seat} in {games} games: scored {100 * scored.mean():.1f}%;"
          f" mean P(playable) ({k} samples): {means}, counting prior {100 * pc.mean():.1f}%")
    others = [name for name in p if name != "learned belief"]
    print("| P(playable) under the learned belief | plays | scored % | counting prior's mean P % |"
          + "".join(f" {name}: mean P % |" for name in others))
    print("|---|---|---|---|" + "---|" * len(others))
    pb = p["learned belief"]
    for lo in (0.0, 0.2, 0.4, 0.6, 0.8):
        sel = (pb >= lo) & ((pb < lo + 0.2) | (lo == 0.8))
        if bool(sel.any()):
            print(f"| {lo:.1f}-{lo + 0.2:.1f} | {int(sel.sum())} | {100 * scored[sel].mean():.1f} "
                  f"| {100 * pc[sel].mean():.1f} |"
                  + "".join(f" {100 * p[n][sel].mean():.1f} |" for n in others))
    miss = scored < 0.5
    for name, v in p.items():  # how the rating tracks success, per belief
        if bool(miss.any()):
            print(f"{name}: mean P on the plays that scored {100 * v[~miss].mean():.1f}%, on the "
                  f"{int(miss.sum())} that did not {100 * v[miss].mean():.1f}%")
        else:
            print(f"{name}: mean P {100 * v.mean():.1f}% (every play scored)")


if __name__ == "__main__":
    main()
