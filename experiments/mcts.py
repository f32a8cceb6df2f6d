"""MO-ISMCTS and RIS-MCTS (Goodman 2019, Table I) on the full game: every seat searches (the paper's "all
players use the same agent"), all games in lockstep on one device, the paper's score (points kept when the
last life is lost: GameConfig.bomb_zero=False).

    python -m experiments.mcts --players 4 --games 48 --iterations 50 --modes mo-ismcts ris-mcts
    python -m experiments.mcts --players 4 --games 48 --iterations 50 --simulation smartbot --record NAME
    python -m experiments.mcts --players 4 --games 8 --iterations 10 --modes ris-mcts \
        --simulation vandenbergh --rule-moves --convention
    python -m experiments.mcts --players 4 --games 48 --iterations 30 --modes ris-mcts --rule-moves \
        --convention --evaluation runs/mcts_value/p4.pt      # RIS-MCTS-NR (train/mcts_value.py)
    python -m experiments.mcts --players 3 --games 48 --iterations 100 --modes ris-mcts --rule-moves \
        --convention --beside smartbot vandenbergh sparta     # Table III: both search families, same deals

Prints, per mode, the mean score ± s.e.m. over the deals (the evaluation deals of --seed, the same for every
mode), the wall time per move (the batch's search time over the moves it decided, so per game), the mean
decision depth (deepest node of each tree, averaged over moves) and the determinizations that were not exact
draws. --beside adds rows on the same deals under the same scoring: a rule bot alone (every seat) and SmartBot
with one seat searching by SPARTA at the table1 budget (the one-ply family), each tree search paired with
them per deal, and every row's score also under HLE's rule (0 when the last life is lost), the rule of the
SmartBot number the paper's Table III quotes. With --record NAME the table goes to
experiments/results/mcts/mcts_<date>_NAME.md.

--mo-deck-chances (MO-ISMCTS with --rule-moves only) works each mover's rule chances out as the paper's code
does in MO-ISMCTS: from the cards left in the deck of the world searched, so the mover's own cards there
count as seen (its RIS-MCTS returns the mover's hand to the deck first, as this package does in both):

    python -m experiments.mcts --players 4 --games 500 --iterations 100 --modes mo-ismcts --rule-moves \
        --mo-deck-chances

A table at the paper's longer budgets takes hours. Its progress (settings, finished rows, the unfinished row's
games) is kept after every move in progress/<the table's name>.pt beside the table (OUT/progress/, or with
--record experiments/results/mcts/progress/, small enough to commit, so that a table longer than a sitting
goes on in the next one, on any machine); after a stop (Ctrl-C, SIGTERM, a crash) the run goes on from its
last move, into the same table, the same games move for move:

    python -m experiments.mcts --resume experiments/results/mcts/progress/mcts_<date>_NAME.pt
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import torch

from experiments.common import claim, command, machine, result_path, sync, write_result
from lbs import ckpt, cli
from lbs.acting import playout_policy
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.state import HanabiState
from lbs.models.io import RULE_BOTS, load_blueprint
from lbs.runs import InUseError, Stopped, StopSignals, make_folder, signal_name, signals_held
from lbs.search import mcts_rules, mcts_value
from lbs.search.config import BUDGETS, SearchConfig
from lbs.search.mcts import MCTS_MODES, ROOT_CHOICES, LeafValues, MctsConfig
from lbs.search.mcts_play import make_moves, search_running
from lbs.search.play import play_games
from lbs.search.report import paired_difference
from lbs.search.setup import SearchSetup
from lbs.seeding import Stream, game_seeds

COUNTERS = ("seconds", "decided", "depth", "draws", "inexact", "fallback", "kept")
"""what `play` counts over a row's moves (kept in its progress, so a resumed row counts on)"""


class DepthSoFar:
    """The decision depth as the paper's code counts it: each seat's agent keeps the deepest node it has
    reached in the game, never reset between its moves, and reports it after every move; its tables
    average those reports. The per-move depth (the deepest node of that move's tree) is at most this."""

    def __init__(self, games: int, players: int, start: dict | None = None):
        self.deepest = torch.zeros(games, players)  # [G, P] each seat's deepest node so far
        self.total = 0.0  # the reports summed over the moves decided
        if start is not None:
            self.deepest, self.total = start["deepest"].clone(), float(start["total"])

    def add(self, live: torch.Tensor, seat: torch.Tensor, depth: list[int]) -> None:
        """The moves of games `live` [L] by `seat` [L], whose trees reached `depth`."""
        now = torch.maximum(self.deepest[live, seat], torch.tensor(depth, dtype=torch.float))
        self.deepest[live, seat] = now
        self.total += float(now.sum())

    def kept(self) -> dict:
        return {"deepest": self.deepest.clone(), "total": self.total}


def play(game: GameConfig, cfg: MctsConfig, games: int, seed: int, simulation: str, device: torch.device,
         evaluate: LeafValues | None = None, start: dict | None = None,
         keep: Callable[[dict], None] | None = None) -> dict:
    """Play `games` deals with every seat searching (the leaves valued by `evaluate` where given); returns
    per-game scores and timing counters. After every move `keep` gets the games' progress (plain tensors and
    numbers); `start`, such a progress, goes on from there: the same games move for move, since a search's
    random numbers are keyed by the game and its move number."""
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, games, device=device))
    search_keys = game_seeds(Stream.SEARCH, seed, games, device=device)
    bot = RULE_BOTS[simulation](game, device) if simulation != "random" else None
    policy = playout_policy(bot, bot.step) if bot is not None else None  # the bot's state reader
    hid = bot.initial_state(games * game.players) if bot is not None else None
    seconds, decided, depth, draws, inexact, fallback, kept = 0.0, 0, 0.0, 0, 0, 0, 0
    uncounted = start is not None and "so_far" not in start  # kept before the count existed: not reported
    so_far = None if uncounted else DepthSoFar(games, game.players, start["so_far"] if start else None)
    if start is not None:
        state = HanabiState(**{k: v.to(device) for k, v in start["state"].items()})
        if bot is not None:
            hid = type(hid)(*(x.to(device) for x in start["hid"]))  # a flat tuple, as select_rows takes it
        seconds, decided, depth, draws, inexact, fallback, kept = (start[k] for k in COUNTERS)
    while not bool(state.done.all()):
        sync(device)
        t = time.perf_counter()
        live, res = search_running(game, state, cfg, search_keys, policy, hid, evaluate)
        sync(device)
        seconds += time.perf_counter() - t
        decided += live.numel()
        depth += sum(res.stats.depth)
        if so_far is not None:
            so_far.add(live.cpu(), state.cur_player[live].cpu(), res.stats.depth)
        draws, inexact = draws + res.stats.draws, inexact + res.stats.inexact
        fallback, kept = fallback + res.stats.fallback, kept + res.stats.kept
        state, hid, _ = make_moves(game, state, live, res, policy, hid)
        if keep is not None:
            counted = (seconds, decided, depth, draws, inexact, fallback, kept)
            keep({"state": {f.name: getattr(state, f.name).cpu() for f in fields(state)},
                  "hid": [x.cpu() for x in hid] if bot is not None else [],
                  **dict(zip(COUNTERS, counted, strict=True)),
                  **({"so_far": so_far.kept()} if so_far is not None else {})})
        print(f"  move {int(state.num_steps.max())}: {int((~state.done).sum())} games running, "
              f"{seconds / decided:.2f} s per move", file=sys.stderr, flush=True)
    return {"scores": state.fireworks.sum(1).double().cpu(), "lost": (state.life_tokens <= 0).cpu(),
            "seconds": seconds, "moves": decided, "depth": depth / decided,
            "depth_so_far": so_far.total / decided if so_far is not None else None, "draws": draws,
            "inexact": inexact, "fallback": fallback, "kept": kept}


@contextlib.contextmanager
def mo_deck_chances():
    """Within it, Table II's rules read each mover's chances with the mover's own cards of the world searched
    left out of what its slots may be (lbs.bots.vandenbergh.state_view's left_out): the paper's MO-ISMCTS
    code applies its rules to the determinized state with the mover's hand in place, and a rule's chances
    count only the deck's cards."""
    rules, view = mcts_rules.table_ii_moves, mcts_rules.state_view

    def table_ii_moves(game: GameConfig, state, *args) -> torch.Tensor:
        hand = state.hands[torch.arange(state.batch_size, device=state.device), state.cur_player]  # [G, H]
        own = engine.card_histogram(hand, game.card_types)  # [G, T] the mover's own cards in this world
        mcts_rules.state_view = functools.partial(view, left_out=own)
        try:
            return rules(game, state, *args)
        finally:
            mcts_rules.state_view = view

    mcts_rules.table_ii_moves = table_ii_moves
    try:
        yield
    finally:
        mcts_rules.table_ii_moves = rules


BESIDE = ("smartbot", "vandenbergh", "sparta")
"""rows --beside plays: a rule bot alone, or SmartBot with seat 0 searching by SPARTA (table1 budget)"""


def beside(name: str, game: GameConfig, games: int, seed: int, device: torch.device,
           cfg: SearchConfig | None = None) -> dict:
    """The same deals as `play`, under the same scoring, played by a rule bot alone (every seat) or, for
    "sparta", by SmartBot with seat 0 searching (cfg, default the table1 budget; its rollouts scored by
    `game`'s rule too); the counters `play` returns where they apply, and the decks."""
    _, net = load_blueprint("smartbot" if name == "sparta" else name, device, game=game)
    if cfg is None:
        budget = BUDGETS["table1"]
        cfg = budget.fit(budget.search, game, rollouts_set=False)
    mode = "sparta" if name == "sparta" else "blueprint"
    with SearchSetup.of(game, net, mode, cfg, device=device) as setup:
        sync(device)
        t = time.perf_counter()
        # SPARTA's exact ranges hold millions of hands a game early on (about 0.5 GB each): 8 games at once
        results = play_games(setup, games, seed, batch_games=games if mode == "blueprint" else 8)
        sync(device)
        seconds = time.perf_counter() - t
    searched = sum(r.searched for r in results)  # the moves its time is per (none without search)
    return {"scores": torch.tensor([float(r.record.score) for r in results], dtype=torch.float64),
            "lost": torch.tensor([r.bombed for r in results]), "seconds": seconds, "moves": searched,
            "searched": searched, "rollouts": cfg.rollouts,
            "decks": torch.tensor([r.record.deck for r in results])}


def learnt(path: str, net: mcts_value.EvalFn) -> str:
    """What an evaluation function file says of itself: sha256, config, fit and the games it learnt from."""
    fit = net.about["fit"]
    return (f"\n- evaluation function: sha256 {ckpt.file_hash(path)[:16]}, {net.about['config']}; learnt "
            f"from {', '.join(net.about['sources'])}: RMS error {fit['rms_train']:.2f} points on "
            f"{fit['pairs']} training pairs, {fit['rms_held_out']:.2f} on {fit['held_out_pairs']} held-out "
            f"pairs (a constant guess {fit['rms_constant']:.2f})")


PROGRESS = "mcts_progress"
"""the checkpoint kind of a run's progress file (what --resume reads)"""


def shown(path: Path) -> str:
    """A path as a user types it: from the working folder when it lies under it (a record's is absolute)."""
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    return str(path)


def again(path: Path) -> str:
    """How a stopped run goes on."""
    return f"go on with python -m experiments.mcts --resume {shown(path)}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--players", type=int, default=4, help="players (the paper's Table I: 4)")
    ap.add_argument("--games", type=int, default=48, help="deals, played at once")
    ap.add_argument("--iterations", type=int, default=50, help="MCTS iterations per move")
    ap.add_argument("--exploration", type=float, default=MctsConfig.exploration, help="UCT's C on [0, 1]")
    ap.add_argument("--candidates", type=int, default=MctsConfig.candidates,
                    help="hands proposed per determinization")
    ap.add_argument("--modes", nargs="+", default=list(MCTS_MODES), choices=MCTS_MODES)
    ap.add_argument("--simulation", default="random", choices=("random", *RULE_BOTS),
                    help="simulation policy: uniformly random legal moves, or a rule bot's (smartbot, "
                    "vandenbergh: the paper's rule policy)")
    ap.add_argument("--rule-moves", action="store_true",
                    help="the tree takes only Table II's rule moves (MctsConfig.rule_moves)")
    ap.add_argument("--convention", action="store_true",
                    help="the 'playable now' convention (MctsConfig.convention)")
    ap.add_argument("--evaluation", default=None, metavar="FILE",
                    help="value new leaves by this evaluation function, no simulation (RIS-MCTS-NR; "
                    "train/mcts_value.py); with --iterations 1 the function plays greedily")
    ap.add_argument("--beside", nargs="*", default=[], choices=BESIDE,
                    help="also play the same deals with a rule bot alone, or SmartBot + SPARTA (one seat, "
                    "the table1 budget), each tree search paired with them (the paper's Table III)")
    ap.add_argument("--single-card-hint", action="store_true",
                    help="with --rule-moves --convention, the paper's code's extra rule: hint the next "
                    "player about a single playable card (MctsConfig.single_card_hint)")
    ap.add_argument("--root-choice", default=MctsConfig.root_choice, choices=ROOT_CHOICES,
                    help="the move made: the root child with the highest mean, or the most visited (the "
                    "paper's code) (MctsConfig.root_choice)")
    ap.add_argument("--rollout-depth", type=int, default=MctsConfig.rollout_depth,
                    help="cut every simulation after this many moves and score the fireworks so far (the "
                    "paper's code: 18; 0: to the end) (MctsConfig.rollout_depth)")
    ap.add_argument("--tree-depth", type=int, default=MctsConfig.tree_depth,
                    help="no tree node deeper than this (the paper's code: players + 1 by default; 0: no "
                    "limit) (MctsConfig.tree_depth)")
    ap.add_argument("--mo-deck-chances", action="store_true",
                    help="MO-ISMCTS's rule chances as the paper's code works them out: from the deck of the "
                    "world searched, the mover's own cards there counted as seen (--modes mo-ismcts "
                    "--rule-moves only)")
    ap.add_argument("--seed", type=int, default=0, help="run seed: the deals and every search's draws")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/mcts/mcts_<date>_NAME.md")
    ap.add_argument("--out", default="runs/mcts",
                    help="scratch folder when not recording; the progress goes to progress/ beside the table "
                    "(OUT/progress/, or experiments/results/mcts/progress/ with --record)")
    ap.add_argument("--resume", default=None, metavar="FILE",
                    help="go on with a stopped run from its progress file (progress/<table's name>.pt, "
                    "kept after every move), which holds every setting: give no other flag")
    args = ap.parse_args(argv)
    given = sys.argv[1:] if argv is None else list(argv)
    progress, resume = None, args.resume
    if resume is not None:
        if sum(a.startswith("-") for a in given) != 1:
            sys.exit("mcts: --resume takes every setting from its progress file; give no other flag")
        try:
            progress = ckpt.load(resume, PROGRESS)
        except ckpt.CheckpointError as e:
            sys.exit(f"mcts: --resume: {e}")
        given = progress["argv"]
        args = ap.parse_args(given)
    try:
        if args.mo_deck_chances and (args.modes != ["mo-ismcts"] or not args.rule_moves or args.beside):
            raise ValueError("--mo-deck-chances changes MO-ISMCTS's rule moves only: pass --modes mo-ismcts "
                             "--rule-moves and no --beside")
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        game = GameConfig(players=args.players, bomb_zero=False)
        cfgs = {m: MctsConfig(mode=m, iterations=args.iterations, exploration=args.exploration,
                              candidates=args.candidates, rule_moves=args.rule_moves,
                              convention=args.convention, sim_policy=args.simulation,
                              evaluation=args.evaluation, root_choice=args.root_choice,
                              single_card_hint=args.single_card_hint, rollout_depth=args.rollout_depth,
                              tree_depth=args.tree_depth)
                for m in args.modes}
        device = torch.device(args.device)
        net = mcts_value.load(args.evaluation, game, device) if args.evaluation else None
    except (ValueError, ckpt.CheckpointError) as e:
        sys.exit(f"mcts: {e}")
    if progress is None:
        out = result_path("mcts", args.record, args.out)
        kept_at = out.parent / "progress" / f"{out.stem}.pt"  # beside the table: a record's can be committed
        if kept_at.exists():
            sys.exit(f"mcts: {shown(kept_at)} exists, a stopped run's progress: go on with it "
                     f"(--resume {shown(kept_at)}) or remove it")
    else:  # the table goes beside its progress, where the run began it (a stop may have written its finished
        kept_at = Path(resume)  # rows there), in whatever clone or folder the two now are
        try:  # (refused while the run, or another resume of it, is still going)
            out = claim(kept_at.parent.parent / f"{kept_at.stem}.md", "--resume")
        except InUseError as e:
            sys.exit(f"mcts: --resume: {e}")
    machines = [*(progress["machines"] if progress else []), machine()]  # where it began, then each resume
    resumes = progress["resumes"] + 1 if progress else 0
    finished = list(progress["rows"]) if progress else []  # each row's entry, as `row` takes it
    running = progress["running"] if progress else None  # the unfinished row's games
    rows, per_deal, played, done = [], [], {}, []

    def keep(games: dict | None) -> None:
        """Write the progress (atomically, whole before a stop takes effect): the finished rows, the games of
        the row being played."""
        with signals_held():
            make_folder(kept_at.parent)
            ckpt.save(kept_at, PROGRESS, {"argv": given, "machines": machines,
                                          "resumes": resumes, "rows": finished, "running": games})

    def row(key: str, name: str, sim: str, iterations: str, r: dict, depth: str, exact: str,
            so_far: str = "—") -> None:
        s, lost = r["scores"], r["lost"]
        hle = torch.where(lost, 0.0, s)
        sem, hle_sem = s.std() / len(s) ** 0.5, hle.std() / len(s) ** 0.5
        per_move = f"{r['seconds'] / r['moves']:.3f}" if r["moves"] else "—"
        rows.append(f"| {name} | {sim} | {iterations} | {s.mean():.2f} ± {sem:.2f} | {hle.mean():.2f} ± "
                    f"{hle_sem:.2f} | {int(lost.sum())}/{len(s)} | {per_move} | {depth} | {so_far} | "
                    f"{exact} |")
        per_deal.append(f"- {name}: {' '.join(str(int(x)) for x in s.tolist())}")
        played[name] = s
        done.append(key)
        print(f"{name}: {s.mean():.2f} ± {sem:.2f} over {len(s)} deals", flush=True)

    def add(*entry) -> None:
        with signals_held():  # a stop keeps a row whole or not at all
            finished.append(list(entry))
            keep(None)
            row(*entry)

    for entry in finished:
        row(*entry)
    if progress is not None:
        at = f"; {running['mode']} from move {int(running['state']['num_steps'].max())}" if running else ""
        print(f"mcts: resuming {out.name}: rows done: {', '.join(done) or 'none'}{at}", file=sys.stderr)
    StopSignals(deferred=False).install()  # SIGTERM stops like Ctrl-C: the finished rows are written
    stopped = 0
    try:
        for name in args.beside:
            if name in done:
                continue
            r = beside(name, game, args.games, args.seed, device)
            add(name, "smartbot + sparta" if name == "sparta" else name,
                f"— ({r['rollouts']:,} rollouts, {r['searched']:,} moves searched)" if name == "sparta"
                else "—", "—", r, "—", "—")
        for mode, cfg in cfgs.items():
            if mode in done:
                continue
            start = running if running is not None and running["mode"] == mode else None
            with mo_deck_chances() if args.mo_deck_chances else contextlib.nullcontext():
                r = play(game, cfg, args.games, args.seed, args.simulation, device,
                         net.leaf_values if net is not None else None, start,
                         lambda games, m=mode: keep({"mode": m, **games}))
            add(mode, mode, args.simulation, str(args.iterations), r, f"{r['depth']:.2f}",
                f"{r['inexact']}/{r['fallback']}/{r['kept']} of {r['draws']}",
                f"{r['depth_so_far']:.2f}" if r["depth_so_far"] is not None else "—")
    except Exception:  # a bug keeps its traceback; the games played before it are kept all the same
        if kept_at.exists():
            print(f"mcts: stopped by an error; the games so far are kept: {again(kept_at)}", file=sys.stderr)
        raise
    except KeyboardInterrupt as e:
        stopped = e.signum if isinstance(e, Stopped) else signal.SIGINT
        if not rows:  # a row needs every game of its mode, and they play in lockstep
            kept = f"; its games so far are kept: {again(kept_at)}" if kept_at.exists() else ""
            print(f"mcts: stopped by {signal_name(stopped)}: no row finished, no table written{kept}",
                  file=sys.stderr)
            sys.exit(128 + stopped)
    paired = ""
    if args.beside and any(m in played for m in cfgs):
        bases = [n for n in played if n not in cfgs]
        lines = [f"| {m} | " + " | ".join("{:+.2f} ± {:.2f}".format(*paired_difference(played[m], played[b]))
                                          for b in bases) + " |" for m in cfgs if m in played]
        paired = (f"\nEach tree search paired with each row beside it on the same deals (points kept):\n\n"
                  f"| mode | {' | '.join('vs ' + b for b in bases)} |\n|---|{'---|' * len(bases)}\n"
                  + "\n".join(lines) + "\n")
    besides = "" if not args.beside else (
        f"\n- beside: {', '.join(args.beside)} on the same deals, every seat playing the rule bot; smartbot "
        "+ sparta: seat 0 searches by SPARTA over SmartBot (exact range, the table1 budget raised to 50 "
        "rollouts per legal move, delta 0.5), its rollouts scored with points kept; s per move: per "
        "searched move")
    made = {"visits": "the most visited root child",
            "mean": "the root child with the highest mean"}[args.root_choice]
    hint = (", with the paper's code's single-card hint to the next player as a rule"
            if args.single_card_hint else "")
    chances = ("; rule chances: from the deck of the world searched, the mover's own cards there counted as "
               "seen (the paper's MO-ISMCTS code; --mo-deck-chances)") if args.mo_deck_chances else ""
    cut = f", cut after {args.rollout_depth} moves (scored by the fireworks then)" if args.rollout_depth \
        else ""
    cap = f"; no tree node deeper than {args.tree_depth}" if args.tree_depth else ""
    unplayed = [n for n in [*args.beside, *cfgs] if n not in done]
    resumed = f" (stopped and resumed {resumes} time{'s' * (resumes > 1)}: the same games move for move)" \
        if resumes else ""
    cut_short = f"\n- stopped by {signal_name(stopped)}: not played: {', '.join(unplayed)}" if stopped else ""
    leaves = f"valued by {args.evaluation} (no simulation){learnt(args.evaluation, net)}" if net is not None \
        else f"simulated{cut}{cap}"
    header = ("| mode | simulation | iterations | score ± s.e.m. | HLE's rule | lost all | s per move | "
              "depth | depth so far | not exact |")
    text = f"""# MO-ISMCTS and RIS-MCTS, {args.players} players ({datetime.date.today()})

- machine: {"; resumed on ".join(machines)}
- command: `{command(given)}`{resumed}
- {args.games} evaluation deals of seed {args.seed} (the same for every mode); every seat searches; score: the
  fireworks at the end, kept when the last life is lost (the paper's; GameConfig.bomb_zero=False)
- UCT C {args.exploration} on scores scaled to [0, 1]; {args.candidates} proposals per determinization; the
  move made: {made}
- tree moves: {"Table II's rule moves" if args.rule_moves else "every legal move"}; the 'playable now'
  convention: {"on" if args.convention else "off"}{hint}; leaves: {leaves}{chances}
- s per move: the batch's search wall time over the moves it decided (all games searched at once, one
  thread); depth: the deepest node of a move's tree, averaged over moves; depth so far: as the paper's
  code counts it, each seat's deepest node so far in the game, averaged over moves; not exact:
  determinizations where no proposal was accepted / of them, drawn by the fallback / where no hand fit
  and the hand was kept (see lbs.search.mcts.draw_hands); HLE's rule: the same games scored 0 where
  every life was lost (lost all){besides}{cut_short}

{header}
|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}
{paired}
Scores per deal, in deal order (to pair runs on the same deals):

{chr(10).join(per_deal)}
"""
    write_result(text, "mcts", args.record, args.out, out)
    if stopped:
        print(f"mcts: stopped by {signal_name(stopped)}: the finished rows ({', '.join(done)}) are in {out}; "
              f"not played: {', '.join(unplayed)}; {again(kept_at)}", file=sys.stderr)
        sys.exit(128 + stopped)
    kept_at.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the progress folder, when no other run's progress is left there
        kept_at.parent.rmdir()
    print(f"the table is whole: its progress file {shown(kept_at)} is removed")


if __name__ == "__main__":
    main()
