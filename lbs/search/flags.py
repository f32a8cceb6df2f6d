"""The flags of every search entry point (search/run.py, experiments/table1.py, diagnose_lbs.py and
bench_search.py), declared once: the mode or modes (parsed as they are read), the named budget (BUDGETS)
with every SearchConfig field over it, the blueprint and its belief, the device, torch threads, the deals,
and each count a script adds with its bounds (`Parser.count`).

`read` checks them before any work and answers in one line (ValueError; a parse error exits with one line
too): a bad value, a flag that matters to none of the chosen modes (a SearchConfig field, --belief), a mode
named twice, --cuda-graphs off CUDA, and LBS_EAGER set to anything but 1."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import cli
from ..bots.smartbot import eager
from ..configs import add_dataclass_args, apply_overrides, flag_names
from ..models import resolve_device
from ..seeding import MAX_SEED
from .config import BUDGETS, Budget, FieldError, Mode, Sampler, SearchConfig, matters
from .mcts import MctsConfig
from .setup import BLUEPRINT, SearchSetup, belief_for, build_search

THREADS = 1
MCTS_SET_BY_MODE = ("mode",)
"""MctsConfig fields with no flag: --mode (or --modes) sets them"""
"""torch CPU threads by default (--threads): on a small shared CPU more threads wait on each other"""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, and whose counts carry their bounds (`count`, checked by read)."""

    def __init__(self, description: str | None = None, **kwargs):
        super().__init__(description=description, formatter_class=argparse.RawDescriptionHelpFormatter,
                         **kwargs)
        self.bounds: list[tuple[str, str, int, int | None]] = []
        """(dest, flag, lowest, highest or None) of every count"""
        self.sweep: tuple[str, ...] = ()
        """SearchConfig fields the script varies with flags of its own (not the shared ones)"""
        self.checkpoints = Path("checkpoints")
        """where the shipped blueprint and beliefs are (the default --blueprint, the belief shipped for it)"""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}\n")

    def count(self, *names: str, low: int = 0, high: int | None = None, **kwargs) -> argparse.Action:
        """An int flag (or list of ints, with nargs) that must lie in low..high; `read` checks it."""
        action = self.add_argument(*names, type=int, **kwargs)
        self.bounds.append((action.dest, names[-1], low, high))
        return action


def mode_arg(name: str) -> Mode:
    """--mode / --modes: the Mode, parsed as the flag is read."""
    try:
        return Mode.parse(name)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def search_parser(description: str | None, checkpoints: Path, *, budget: str, mode: str | None = None,
                  modes: Sequence[str] | None = None, games: int, sweep: tuple[str, ...] = ()) -> Parser:
    """A parser with the shared search flags: --mode (one, default `mode`) or --modes (several, default
    `modes`), --budget (default `budget`) and a flag per SearchConfig field over it but those in `sweep` (a
    script that varies them declares its own), --blueprint (default: the shipped one in `checkpoints`),
    --players, --belief, --device, --threads, --games (default `games`), --seed, --first-game."""
    ap = Parser(description)
    ap.checkpoints = checkpoints
    if modes is None:
        ap.add_argument("--mode", type=mode_arg, default=Mode.parse(mode),
                        help="blueprint, lbs-K (K >= 1 moves then bootstrap), lbs-inf, sparta, sparta-ma, "
                        f"mo-ismcts or ris-mcts (default {mode})")
    else:
        ap.add_argument("--modes", type=mode_arg, nargs="+", default=[Mode.parse(m) for m in modes],
                        help="each a mode: blueprint, lbs-K, lbs-inf, sparta, sparta-ma, mo-ismcts or "
                        "ris-mcts "
                        f"(default {' '.join(modes)})")
    ap.add_argument("--budget", choices=list(BUDGETS), default=budget,
                    help="the named search budget the SearchConfig flags start from (default %(default)s): "
                    + "; ".join(f"{b.name}: {b.search.rollouts:,} rollouts per searched move, "
                                f"{b.search.min_rollouts} per move before pruning, delta {b.search.delta:g}, "
                                f"for {b.why}" for b in BUDGETS.values()).replace("%", "%%"))
    cli.add_blueprint_args(ap, checkpoints / "blueprint_2p.pt")
    ap.add_argument("--belief", default=None,
                    help="belief checkpoint for the modes that draw hands from it, LBS (default: the one "
                    "shipped with a shipped blueprint, e.g. checkpoints/belief_2p.pt, "
                    "belief_smartbot_<P>p.pt for smartbot; needed with any other); refused where no mode "
                    "reads one")
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (default %(default)s)")
    ap.count("--threads", default=THREADS, help="torch CPU threads (default %(default)s: on a small shared "
             "CPU more threads wait on each other; 0: torch's default)")
    ap.count("--games", low=1, default=games, help="games (evaluation deals) to play (default %(default)s)")
    ap.count("--seed", high=MAX_SEED, default=0, help="which evaluation deals (default %(default)s)")
    ap.count(*flag_names("first_game"), dest="first_game", default=0,
             help="play deals F..F+games-1 (default %(default)s): runs on adjacent deals join (table1 "
             "--combine), and one deal of a table can be played again alone")
    chosen = BUDGETS[budget]
    ap.sweep = sweep
    add_dataclass_args(ap, SearchConfig, defaults=chosen.search, skip=sweep,
                       title=f"SearchConfig fields ([values]: the {chosen.name} budget's; --budget picks "
                       "another; the mode sets how far rollouts go)")
    add_dataclass_args(ap, MctsConfig, defaults=MctsConfig(), skip=MCTS_SET_BY_MODE,
                       title="MctsConfig fields, for the tree searches mo-ismcts and ris-mcts ([values]: the "
                       "defaults)")
    return ap


@dataclass
class Search:
    """What the shared flags ask for, checked (`read`)."""

    modes: list[Mode]
    budget: Budget
    cfg: SearchConfig
    """the budget with the given SearchConfig flags over it, before `fit`"""
    rollouts_set: bool
    """--rollouts was given (the budget does not grow it)"""
    device: torch.device
    blueprint: str
    players: int | None
    belief: str | Path | None
    """the belief the modes draw from (the shipped one unless --belief), None where no mode draws"""
    mcts: MctsConfig = dataclasses.field(default_factory=MctsConfig)
    """the tree searches' settings (the MctsConfig flags over its defaults)"""

    def fit(self, game) -> SearchConfig:
        """The config for the blueprint's game (Budget.fit)."""
        return self.budget.fit(self.cfg, game, self.rollouts_set)

    def setup(self, device: torch.device | None = None, coalesce: bool = False, profile: bool = False,
              make_sampler: Callable | None = None) -> SearchSetup:
        """The blueprint (and belief) loaded and served, the config fitted to its game, in the blueprint mode:
        `with_mode` gives each mode's (checked there). Raises CheckpointError or ValueError in one line."""
        setup = build_search(BLUEPRINT, self.blueprint, self.belief, device or self.device, self.cfg,
                             coalesce, profile, self.players, make_sampler)
        try:
            return dataclasses.replace(setup, cfg=self.fit(setup.game), mcts=self.mcts)
        except ValueError:
            setup.close()
            raise


def read(ap: Parser, args: argparse.Namespace, *, draws_belief: bool | None = None) -> Search:
    """The shared flags checked, before any checkpoint is read (ValueError, one line, naming the flag).
    draws_belief: whether the run reads a belief (default: some mode draws its hands from one)."""
    eager()  # LBS_EAGER set to anything but 1 is refused, not read as unset
    for dest, flag, low, high in ap.bounds:
        value = vars(args)[dest]
        for v in value if isinstance(value, list) else [value]:
            cli.at_least(flag, v, low)
            if high is not None and v > high:
                raise ValueError(f"{flag} {v}: must be in {low}..{high}")
    cli.games(args.games, args.first_game)  # every game number within the seeds' game index
    modes = args.modes if "modes" in vars(args) else [args.mode]
    twice = sorted({str(m) for m in modes if modes.count(m) > 1})
    if twice:
        raise ValueError(f"--modes names {', '.join(twice)} more than once")
    budget = BUDGETS[args.budget]
    given = {f.name: vars(args)[f.name] for f in dataclasses.fields(SearchConfig)
             if f.name not in ap.sweep and vars(args)[f.name] is not None}
    try:
        cfg = apply_overrides(budget.search, argparse.Namespace(**given))
    except FieldError as e:
        if e.field not in given:
            raise
        raise ValueError(f"{flag_names(e.field)[-1]} {given[e.field]}: {e}") from None
    for name in given:
        if not any(matters(name, m) for m in modes):
            raise ValueError(f"{flag_names(name)[-1]}: matters to no mode here "
                             f"({' '.join(map(str, modes))}); leave it out")
    mcts = read_mcts(args, modes)
    device = resolve_device(args.device)
    if cfg.cuda_graphs:
        needs_cuda("--cuda-graphs", device)
    learned = cfg.belief_type == "learned"  # the Bayesian belief needs no file
    draws = any(m.sampler is Sampler.BELIEF for m in modes) and learned if draws_belief is None \
        else draws_belief
    if args.belief is not None and not draws:
        raise ValueError(f"--belief {args.belief}: no mode here draws hands from a belief "
                         f"({' '.join(map(str, modes))}" + ("" if learned else " with --belief-type bayes")
                         + "); leave it out")
    belief = belief_for(draws, args.belief, args.blueprint, ap.checkpoints, args.players)
    return Search(list(modes), budget, cfg, "rollouts" in given, device, args.blueprint, args.players, belief,
                  mcts)


def read_mcts(args: argparse.Namespace, modes: Sequence[Mode]) -> MctsConfig:
    """The MctsConfig flags over its defaults, checked: a bad value or, with no tree search among the modes,
    any such flag at all, refused in one line naming the flag."""
    given = {f.name: vars(args)[f.name] for f in dataclasses.fields(MctsConfig)
             if f.name not in MCTS_SET_BY_MODE and vars(args).get(f.name) is not None}
    if given and not any(m.tree for m in modes):
        name = next(iter(given))
        raise ValueError(f"{flag_names(name)[-1]}: matters to no mode here ({' '.join(map(str, modes))}); "
                         "only mo-ismcts and ris-mcts read it; leave it out")
    try:
        return apply_overrides(MctsConfig(), argparse.Namespace(**given))
    except FieldError as e:
        raise ValueError(f"{flag_names(e.field)[-1]} {given.get(e.field)}: {e}") from None


def needs_cuda(flag: str, device: torch.device) -> None:
    """A flag that captures CUDA graphs, refused off CUDA."""
    if device.type != "cuda":
        raise ValueError(f"{flag} needs a CUDA device (the run is on {device.type})")
