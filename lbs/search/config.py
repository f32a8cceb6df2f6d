"""What a search run is: its mode (where candidate hands come from, how far rollouts go) and its settings."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import Enum
from typing import Literal, get_args

from ..hanabi.config import GameConfig


class Sampler(Enum):
    """Where the searcher's candidate hands come from."""

    NONE = "none"
    """no search: every seat plays the blueprint"""
    BELIEF = "belief"
    """the learned belief (LBS)"""
    RANGE = "range"
    """the exact range, filtered by the partner's blueprint (SPARTA)"""
    INFOSET = "infoset"
    """tree search (MO-ISMCTS, RIS-MCTS): each iteration redraws hands from the information set
    (lbs.search.mcts.draw_hands)"""


MAX_COUNT = 2**31 - 1
"""The largest rollout, row or range count a search takes (counts are int32-safe on every device)."""

MODES = ("blueprint", "sparta", "sparta-ma", "lbs-inf", "lbs-K (K >= 1)", "mo-ismcts", "ris-mcts")
TREE_MODES = ("mo-ismcts", "ris-mcts")
"""The tree searches (lbs.search.mcts): every seat searches, with MctsConfig's settings"""

Knowledge = Literal["smartbot", "none"]
"""SearchConfig.knowledge's values (its flag offers them as choices)."""
KNOWLEDGE: tuple[str, ...] = get_args(Knowledge)
BeliefType = Literal["learned", "bayes"]
"""SearchConfig.belief_type's values (its flag offers them as choices)."""
BELIEF_TYPES: tuple[str, ...] = get_args(BeliefType)


@dataclass(frozen=True)
class Mode:
    """A search mode, parsed from its name: 'blueprint', 'sparta', 'sparta-ma', 'lbs-inf', 'lbs-K'
    (K >= 1), or a tree search, 'mo-ismcts' or 'ris-mcts'."""

    name: str
    sampler: Sampler
    depth: int | None
    """blueprint moves after the candidate move before bootstrapping with Q; None: play to the end"""
    joint: bool = False
    """retrospective multi-agent SPARTA (lbs.search.joint_range): both seats search, each partner's search
    replayed over its range; False: one seat searches (SearchConfig.seat)"""

    @classmethod
    def parse(cls, name: str) -> Mode:
        """The mode called `name`; ValueError naming the accepted modes for anything else."""
        if name == "blueprint":
            return cls(name, Sampler.NONE, None)
        if name == "sparta":
            return cls(name, Sampler.RANGE, None)
        if name == "sparta-ma":
            return cls(name, Sampler.RANGE, None, joint=True)
        if name == "lbs-inf":
            return cls(name, Sampler.BELIEF, None)
        if name in TREE_MODES:
            return cls(name, Sampler.INFOSET, None)
        if name.startswith("lbs-") and name[4:].isdigit():
            if int(name[4:]) >= 1:
                return cls(name, Sampler.BELIEF, int(name[4:]))
            raise ValueError(f"mode {name!r}: LBS needs at least one rollout move "
                             "(lbs-1 or more, or lbs-inf)")
        raise ValueError(f"unknown mode {name!r}; choose from {', '.join(MODES)}")

    @property
    def searches(self) -> bool:
        return self.sampler is not Sampler.NONE

    @property
    def tree(self) -> bool:
        """MO-ISMCTS or RIS-MCTS: MctsConfig's settings, not SearchConfig's, decide its moves"""
        return self.sampler is Sampler.INFOSET

    def __str__(self) -> str:
        return self.name


class FieldError(ValueError):
    """A SearchConfig field's bad value, naming the field (`field`), so an entry point can name its flag."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass
class SearchConfig:
    """How one seat searches (how far its rollouts go is the mode's: Mode.depth). Its defaults are the LBS
    paper's budget; entry points start from a named one (BUDGETS)."""

    rollouts: int = 10_000
    """rollouts per searched move, split over the moves still in play (see reference_budget)"""
    min_rollouts: int = 100
    """rollouts each legal move gets before it may be pruned; also the samples drawn per round"""
    prune_z: float = 2.0
    """a move whose mean is more than this many standard errors below the best stops receiving rollouts"""
    delta: float = 0.05
    """play the search move only if its mean beats the blueprint move's by more than this"""
    reference_budget: bool = False
    """the reference SPARTA's schedule (SearchBot): each legal move gets at most rollouts // legal moves
    rollouts, a pruned move's share is left unspent, and a move is pruned once its upper bound (mean +
    prune_z s.e.) falls below the best lower bound, the blueprint move's bounds raised by delta
    (pruning.prune_bounds). False: the moves still in play share the whole budget, and a move is pruned
    once its mean is prune_z of its own standard errors below the best mean (pruning.prune)"""
    keep_lost_points: bool = False
    """a rollout that ends in a lost game (every life spent) is worth its points minus one, as the reference
    SPARTA's server scores it by default, instead of 0 (HLE's rule, by which the real game is judged). On
    SmartBot the returns' variance is then 1.8-3.9x smaller (experiments/rollout_spread.py: the rare lost game
    no longer costs every point), so the same rollouts tell the moves apart better"""
    knowledge: Knowledge = "none"
    """LBS: where each sampled hand is drawn. "none": the belief alone, hint-consistent samples kept by
    rejection (the papers' LBS; on the shipped pair level with or above "smartbot", docs/results.md).
    "smartbot": within the identities SmartBot's public card knowledge (its conventions, followed from the
    searcher's own observations) allows the searcher's cards: the blueprint's own knowledge when it is
    SmartBot, else a SmartBot followed beside the blueprint for its game (samplers.LearnedBelief), which
    only suits a blueprint that learnt SmartBot's conventions"""
    belief_type: BeliefType = "learned"
    """LBS: the belief its hands are drawn from. "learned": the belief checkpoint trained for the blueprint
    (--belief); "bayes": BAD's factorised Bayesian belief, updated after every partner move by the
    blueprint's own policy on drawn hands (lbs.search.bayes_belief: no training, any network blueprint)"""
    min_valid: int = 1
    """fewer valid sampled hands than this in the first round: play the blueprint move (a fallback)"""
    seat: int = 0
    """the searching seat; every other seat plays the blueprint"""
    max_range: int = 1_000_000
    """SPARTA: while the exact range holds more hands than this, its pending counterfactual filters wait and
    hands are drawn from it by rejection (the filters run on the draws only); at most this many, the
    filters run on every hand"""
    max_range_joint: int = 80
    """sparta-ma: a searched move's range-search (the search replayed for every hand the searcher might have
    seen, its partner's hands consistent with the common knowledge) runs once that range holds at most this
    many hands; until then the searcher's partner plays the blueprint (retrospective belief updates). 0:
    never, single-agent SPARTA by the first mover (the SPARTA paper's MR, Table 3)"""
    max_rows: int = 8192
    """rollouts run in one engine batch (memory cap); results do not depend on it"""
    cuda_graphs: bool = False
    """capture the rollout step as a CUDA graph per batch size and replay it (lbs.graphs); batches are
    padded to powers of two so a few graphs serve every decision. Off CUDA it runs eagerly (tests)"""

    def __post_init__(self) -> None:
        """Every field on its own, checked where any entry point builds a config (the game: `check`)."""
        for name in ("rollouts", "min_rollouts", "max_rows", "max_range"):
            v = vars(self)[name]
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_COUNT:
                raise FieldError(name, f"SearchConfig.{name}={v!r}: must be an int in 1..{MAX_COUNT}")
        v = self.max_range_joint
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_COUNT:
            raise FieldError("max_range_joint", f"SearchConfig.max_range_joint={v!r}: must be an int in "
                             f"0..{MAX_COUNT}")
        if not 0 <= self.min_valid <= self.min_rollouts:
            raise FieldError("min_valid", f"SearchConfig.min_valid={self.min_valid}: must be in "
                             f"0..min_rollouts ({self.min_rollouts})")
        if not 0 < self.prune_z < math.inf:
            raise FieldError("prune_z", f"SearchConfig.prune_z={self.prune_z}: must be finite and > 0")
        if not 0 <= self.delta < math.inf:
            raise FieldError("delta", f"SearchConfig.delta={self.delta}: must be finite and >= 0")
        if self.belief_type not in BELIEF_TYPES:
            raise FieldError("belief_type", f"SearchConfig.belief_type={self.belief_type!r}: must be one of "
                             f"{', '.join(BELIEF_TYPES)}")
        if self.knowledge not in KNOWLEDGE:
            raise FieldError("knowledge", f"SearchConfig.knowledge={self.knowledge!r}: must be one of "
                             f"{', '.join(KNOWLEDGE)}")

    def check(self, game: GameConfig, searches: bool = True) -> None:
        """ValueError naming the field, before any work: the fields against the game (the budget only when
        something searches with it)."""
        self.__post_init__()
        if not 0 <= self.seat < game.players:
            raise FieldError("seat", f"SearchConfig.seat={self.seat}: must be in 0..{game.players - 1} "
                             f"for {game.players} players")
        need = self.min_rollouts * game.num_moves
        if searches and self.rollouts < need:
            raise FieldError("rollouts", f"SearchConfig.rollouts={self.rollouts} is too small: every one "
                             f"of up to {game.num_moves} legal moves needs min_rollouts={self.min_rollouts} "
                             f"rollouts (at least {need}); raise rollouts or lower min_rollouts")


ONLY_FOR: dict[str, Sampler] = {"max_range": Sampler.RANGE, "knowledge": Sampler.BELIEF,
                                "belief_type": Sampler.BELIEF}
"""SearchConfig fields that only modes drawing their hands from one sampler read; every other field matters to
every mode that searches (and none to the blueprint alone)."""
ONLY_JOINT = frozenset({"max_range_joint"})
"""SearchConfig fields that only the multi-agent mode (sparta-ma) reads."""


def matters(field: str, mode: Mode) -> bool:
    """Whether SearchConfig.<field> changes anything in `mode` (none does in a tree search)."""
    if mode.tree:
        return False
    if field in ONLY_JOINT:
        return mode.joint
    return mode.searches and ONLY_FOR.get(field, mode.sampler) is mode.sampler


@dataclass(frozen=True)
class Budget:
    """A named search budget: the SearchConfig an entry point starts from, its flags overriding any field."""

    name: str
    search: SearchConfig
    grows: bool
    """on a game with more legal moves than the budget has rollouts for (min_rollouts each), rollouts are
    raised to min_rollouts per move, unless they were set (a 3-player game: 30 moves; 4: 38; 5: 48)"""
    why: str
    """what it is for and why its delta (--budget's help says it)"""

    def fit(self, cfg: SearchConfig, game: GameConfig, rollouts_set: bool) -> SearchConfig:
        """cfg (this budget with flags over it) for `game`: rollouts raised where the budget grows."""
        if not self.grows or rollouts_set:
            return cfg
        return dataclasses.replace(cfg, rollouts=max(cfg.rollouts, cfg.min_rollouts * game.num_moves))


BUDGETS: dict[str, Budget] = {b.name: b for b in (
    Budget("quick", SearchConfig(rollouts=500, min_rollouts=25, delta=0.5), grows=True,
           why="a first run on a CPU: with so few rollouts a move's mean is a few tenths of a point "
           "uncertain, so the best of some twenty candidates beats the blueprint's by 0.05 by chance on most "
           "moves; a margin of 0.5 keeps the deviations that gain (full game, shipped pair: at this budget "
           "LBS-16 gained +0.9 on 64 deals at 0.5 and lost -1.9 at 0.05: docs/search.md)"),
    Budget("table1", SearchConfig(rollouts=1_000, min_rollouts=50, delta=0.5), grows=True,
           why="the recorded Table 1 (README): the same margin as quick, for the same reason (at 1,000 "
           "rollouts LBS-16 on the previous pair gained +0.46 ± 0.41 at 0.05 and +1.92 ± 0.28 at 0.5)"),
    Budget("paper", SearchConfig(), grows=False,
           why="the LBS paper's setting (SearchConfig's defaults), never grown"),
)}
"""Every named budget; each entry point's --budget picks one (search/run.py: quick; experiments: table1)."""
