"""One search set-up for every entry point (search/run.py, the experiments, the tests): from a mode and the
checkpoints (or models in memory) it loads the models, serves them, checks the blueprint and the config,
builds a hand sampler per batch of games and wraps the clock when profiling."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..acting import Policy, QFunction, playout_policy
from ..blueprint import Capabilities, CardKnowledge
from ..blueprint import check as declared
from ..hanabi.config import GameConfig
from ..infer import BELIEF, BeliefHandle, InferenceServer, QNetHandle
from ..models import load_belief, load_blueprint
from ..models.io import shipped_belief
from .bayes_belief import BayesBelief
from .config import Mode, Sampler, SearchConfig
from .exact_range import ExactRange
from .mcts import MctsConfig
from .mcts_value import EvalFn
from .mcts_value import load as load_evaluation
from .samplers import HandSampler, LearnedBelief, serve
from .timing import Timing

BLUEPRINT = Mode.parse("blueprint")


def smartbot_for(game: GameConfig, device: torch.device | str) -> CardKnowledge:
    """SmartBot for `game`, followed beside another blueprint for its card knowledge (SearchConfig.knowledge);
    a game SmartBot cannot play is refused in one line that says how to search without it."""
    try:
        return load_blueprint("smartbot", device, game=game)[1]
    except ValueError as e:
        raise ValueError(f"--knowledge smartbot: LBS draws its hands within SmartBot's card knowledge, and "
                         f"SmartBot cannot follow this game ({e}); use --knowledge none") from None


def check_blueprint(mode: Mode, net: nn.Module) -> Capabilities:
    """The blueprint's declared capabilities (lbs.blueprint.check), and what the mode needs of them, each
    refused in one line: a leaf value (LBS-K), a recurrent state that sees public features only (search;
    SPARTA's range re-runs the partner's step on every candidate hand with that shared state)."""
    caps = declared(net)
    if mode.depth is not None and not caps.value:
        raise ValueError(f"{mode}: bootstraps its leaves with the blueprint's Q-values, and this "
                         "blueprint's scores mark its move and are no value; use lbs-inf or sparta")
    if mode.searches and not mode.tree and not caps.public_state:
        raise ValueError(f"{mode}: search needs a blueprint whose recurrent state sees public "
                         "features only (publ_lstm or ff), so one state serves every sampled hand; this "
                         "one's is private (lstm), so its partner state would carry the searcher's true "
                         "cards")
    return caps


@dataclass
class SearchSetup:
    """Everything a search run needs, checked once. `make_sampler` replaces the mode's sampler (test doubles,
    diagnostics); `timing`, when given, collects where the time goes."""

    game: GameConfig
    mode: Mode
    cfg: SearchConfig
    net: nn.Module
    """the blueprint as loaded: what check_blueprint reads (its value, range and state capabilities); every
    call of it goes through `server` (see `blueprint`), but for a rule bot's card knowledge, which LBS's
    sampler reads from the module itself (it has no weights to serve)"""
    server: InferenceServer
    """serves the blueprint as its default model and, for LBS, the belief"""
    device: torch.device
    timing: Timing | None = None
    make_sampler: Callable[[], HandSampler] | None = None
    mcts: MctsConfig = dataclasses.field(default_factory=MctsConfig)
    """a tree search's settings (MO-ISMCTS, RIS-MCTS: Mode.tree; its `mode` is the run's mode, whatever
    this says); the other modes ignore it"""
    smartbot: CardKnowledge | None = None
    """SmartBot for the blueprint's game, followed beside a blueprint that keeps no card knowledge of its own:
    the knowledge LBS draws its hands within (SearchConfig.knowledge "smartbot"); loaded by the first
    set-up whose mode draws within it (`rule_knowledge`), then shared by its copies (`with_mode`)"""

    caps: Capabilities = dataclasses.field(init=False)
    """the blueprint's declared capabilities, checked against the mode"""
    evaluation: EvalFn | None = dataclasses.field(init=False, default=None)
    """a tree search's learned evaluation function (MctsConfig.evaluation: RIS-MCTS-NR), loaded and checked
    against the game once"""

    def __post_init__(self) -> None:
        self.device = torch.device(self.device)
        self.cfg.check(self.game, self.mode.searches)
        self.caps = check_blueprint(self.mode, self.net)
        if self.mode.tree and self.mcts.evaluation is not None:
            self.evaluation = load_evaluation(self.mcts.evaluation, self.game, self.device)
        if self.mode.joint and self.game.players != 2:
            raise ValueError(f"{self.mode}: multi-agent SPARTA is built for 2 players (each seat replays the "
                             f"other's search over one range); this game has {self.game.players}")
        draws = self.mode.sampler is Sampler.BELIEF and self.make_sampler is None
        if draws and self.cfg.belief_type == "learned" and BELIEF not in self.server.weights.names():
            raise ValueError(f"{self.mode}: LBS needs a belief trained for this blueprint (--belief)")
        if draws and self.cfg.belief_type == "bayes" and not self.caps.public_split:
            raise ValueError(f"{self.mode}: --belief-type bayes asks the blueprint about drawn hands through "
                             "the networks' public/private split, which this blueprint has not; use "
                             "--belief-type learned")
        # SmartBot loaded now, where a mode draws within its knowledge: a game it cannot follow is refused
        # before any work
        if self.make_sampler is None and self.knowledge_shown == "smartbot" and not self.caps.card_knowledge \
                and self.smartbot is None:
            self.smartbot = smartbot_for(self.game, self.device)

    @classmethod
    def of(cls, game: GameConfig, net: nn.Module, mode: Mode | str, cfg: SearchConfig | None = None,
           belief: nn.Module | None = None, device: torch.device | str = "cpu", coalesce: bool = False,
           profile: bool = False, make_sampler: Callable[[], HandSampler] | None = None) -> SearchSetup:
        """A set-up for models in memory: serves `net` (and `belief`, which LBS needs unless make_sampler
        replaces the belief). coalesce: merge the calls of concurrent groups (play_games' `groups`)."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        server = serve(net, belief, device, coalesce=coalesce)
        try:
            return cls(game, mode, cfg or SearchConfig(), net, server, torch.device(device),
                       Timing() if profile else None, make_sampler)
        except ValueError:
            server.close()
            raise

    @property
    def blueprint(self) -> QNetHandle:
        """The served blueprint (every search call of it goes through this handle)."""
        return self.server.qnet()

    @property
    def belief(self) -> BeliefHandle:
        """The served belief (LBS; served only when a belief was given)."""
        return self.server.belief()

    @property
    def q_fn(self) -> QFunction:
        """The served blueprint's step; with profiling its time goes to `networks` (not inside a captured
        rollout step: no clock runs there, the networks' time stays in the rollouts')."""
        return self._timed(self.blueprint.step)

    def moves_fn(self, values: bool) -> QFunction:
        """The served blueprint's step read for its moves alone (Blueprint.moves: a policy network beside Q
        does not run Q's head, nor Q at all where no value is read after, `values` False); timed as q_fn."""
        return self._timed(functools.partial(self.blueprint.moves, values=values))

    def _timed(self, step: QFunction) -> QFunction:
        if self.timing is None or self.cfg.cuda_graphs:
            return step
        return self.timing.wrap(step)

    @property
    def playout(self) -> Policy:
        """What rollouts play the blueprint with: its moves (moves_fn; LBS-K's leaf value reads q_fn), or
        its own state reader where it has one and no rollout ends on a leaf value (acting.playout_policy:
        the same moves, no observation encoded)."""
        if self.mode.depth is None:
            return playout_policy(self.net, self.moves_fn(values=False))
        return self.moves_fn(values=True)

    def initial_state(self, rows: int) -> tuple:
        return self.blueprint.initial_state(rows)

    @property
    def rule_knowledge(self) -> CardKnowledge:
        """SmartBot's public card knowledge, as LBS draws within it (SearchConfig.knowledge "smartbot"): the
        blueprint's own if it keeps card knowledge (SmartBot), else that of a SmartBot for the blueprint's
        game followed beside it (loaded here once). ValueError (one line) for a game SmartBot cannot play."""
        if self.caps.card_knowledge:
            return self.net
        if self.smartbot is None:
            self.smartbot = smartbot_for(self.game, self.device)
        return self.smartbot

    @property
    def knowledge(self) -> CardKnowledge | None:
        """The card knowledge LBS draws its hands within (SearchConfig.knowledge), or None: the learned belief
        alone, or a mode that draws no hands from it."""
        knows = self.mode.sampler is Sampler.BELIEF and self.cfg.knowledge == "smartbot"
        return self.rule_knowledge if knows else None

    @property
    def knowledge_shown(self) -> str | None:
        """SearchConfig.knowledge as a result shows it: the value for a mode drawing its hands from the
        belief, None for the others (it changes nothing there)."""
        return self.cfg.knowledge if self.mode.sampler is Sampler.BELIEF else None

    @property
    def belief_shown(self) -> str | None:
        """SearchConfig.belief_type as a result shows it: for a mode drawing from a belief, else None."""
        return self.cfg.belief_type if self.mode.sampler is Sampler.BELIEF else None

    def sampler(self) -> HandSampler | None:
        """A fresh hand sampler for one batch of games; None for the blueprint alone."""
        if self.make_sampler is not None:
            return self.make_sampler()
        if self.mode.sampler is Sampler.BELIEF and self.cfg.belief_type == "bayes":
            return BayesBelief(self.game, self.blueprint, self.cfg.seat, self.knowledge)
        if self.mode.sampler is Sampler.BELIEF:
            return LearnedBelief(self.game, self.server, self.cfg.seat, self.knowledge)
        if self.mode.sampler is Sampler.RANGE:
            return ExactRange(self.game, self.blueprint, self.cfg.seat, max_range=self.cfg.max_range)
        return None

    def with_mode(self, mode: Mode | str, timing: Timing | None = None, **cfg) -> SearchSetup:
        """The same models and server with another mode (and config fields), e.g. each row of a table."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        return dataclasses.replace(self, mode=mode, cfg=dataclasses.replace(self.cfg, **cfg), timing=timing)

    def blueprint_only(self) -> SearchSetup:
        """The blueprint alone on the same server (the baseline every search is paired with)."""
        return dataclasses.replace(self, mode=BLUEPRINT, timing=None, make_sampler=None)

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> SearchSetup:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def belief_for(draws: bool, belief: str | Path | None, blueprint: str | Path, checkpoints: Path,
               players: int | None = None) -> str | Path | None:
    """The belief file a run draws hands from: `belief`, else the one shipped for the blueprint (None if there
    is none: the set-up then says the mode needs one); None when it draws none (`draws` False), so that none
    is loaded, checked against the blueprint or recorded."""
    if not draws:
        return None
    return belief if belief is not None else shipped_belief(blueprint, checkpoints, players)


def build_search(mode: Mode | str, blueprint: str | Path, belief: str | Path | None = None,
                 device: torch.device | str = "cpu", cfg: SearchConfig | None = None, coalesce: bool = False,
                 profile: bool = False, players: int | None = None,
                 make_sampler: Callable[[GameConfig], HandSampler] | None = None) -> SearchSetup:
    """Load the blueprint (and, for LBS or whenever given, the belief trained for it) and set up search;
    players: a rule bot's player count (a checkpoint's must match); make_sampler(game): the hand sampler in
    place of the mode's own (then LBS needs no belief). Raises CheckpointError or ValueError (one line each)
    on a bad file, pair, mode or config."""
    mode = Mode.parse(mode) if isinstance(mode, str) else mode
    game, net = load_blueprint(blueprint, device=device, players=players)
    model = None
    if belief is not None:
        _, model = load_belief(belief, blueprint_path=blueprint, game=game, device=device)
    return SearchSetup.of(game, net, mode, cfg, model, device, coalesce, profile,
                          None if make_sampler is None else lambda: make_sampler(game))
