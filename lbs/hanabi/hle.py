"""Bridge to hanabi-learning-environment (HLE): deal chosen decks, convert states both ways, let our
policies play HLE's rl_env, and diff our engine against HLE step by step.

HLE is imported lazily, so the rest of the package works without it. HLE has no "deal this card"
call; a deal move taken from an earlier game's history deals that card, so applying one deal move per
card id in deck order reproduces any deck. HLE states point into their HanabiGame: an HLEGame keeps
it alive (and is cached per GameConfig, so it lives as long as the process).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import torch

from . import engine
from .config import DISCARD, GameConfig
from .encode import encode
from .policies import ObsPolicy, StatePolicy
from .record import GameRecord
from .rng import hash_keys
from .state import HanabiState

INSTALL_HINT = (
    "hanabi-learning-environment is not installed; install the extra with "
    "`CMAKE_POLICY_VERSION_MINIMUM=3.5 pip install -e .[hle]` (its CMake file needs that policy "
    "setting with cmake >= 4)"
)


def import_pyhanabi():
    """HLE's pyhanabi module, or an ImportError that says how to install it."""
    try:
        from hanabi_learning_environment import pyhanabi
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(INSTALL_HINT) from e
    if not (pyhanabi.cdef_loaded() and pyhanabi.lib_loaded()):  # pragma: no cover
        raise ImportError(f"HLE's C library failed to load. {INSTALL_HINT}")
    return pyhanabi


def hle_available() -> bool:
    try:
        import_pyhanabi()
    except ImportError:
        return False
    return True


# ---- games and states -----------------------------------------------------------------------------
@dataclass
class HLEState:
    """An HLE state plus the deck order it deals from (HLE itself deals at random)."""

    game: HLEGame
    state: Any  # pyhanabi.HanabiState
    deck: np.ndarray  # [N] card ids in deal order

    def copy(self) -> HLEState:
        return HLEState(self.game, self.state.copy(), self.deck)

    @property
    def deck_pos(self) -> int:
        """Cards dealt so far."""
        return self.game.cfg.num_cards - self.state.deck_size()

    def __str__(self) -> str:
        return str(self.state)


class HLEGame:
    """One pyhanabi.HanabiGame for a GameConfig, with what is needed to deal chosen decks fast.

    Get instances with hle_game(cfg) (cached), so states never outlive their game.
    """

    def __init__(self, cfg: GameConfig):
        ph = import_pyhanabi()
        self.cfg, self.ph = cfg, ph
        # seed 0 makes the harvesting game below deterministic; our decks never use HLE's RNG.
        self.game = ph.HanabiGame({**cfg.hle_params(), "seed": 0})
        if self.game.max_moves() != cfg.num_moves:
            raise RuntimeError(
                f"HLE has {self.game.max_moves()} moves for {cfg}, GameConfig says {cfg.num_moves}"
            )
        self.encoder = ph.ObservationEncoder(self.game, ph.ObservationEncoderType.CANONICAL)
        if self.encoder.shape() != [cfg.obs_dim]:
            raise RuntimeError(
                f"HLE observation shape {self.encoder.shape()} != GameConfig.obs_dim {cfg.obs_dim}"
            )
        self.moves = [self.game.get_move(m) for m in range(cfg.num_moves)]
        self._c_obs = ph.ffi.new("pyhanabi_observation_t*")  # reused by observe()
        self.deal_moves = self._harvest_deal_moves()

    def _harvest_deal_moves(self) -> list:
        """One HLE deal move per card id, taken from one game that deals the whole deck.

        The game discards (or, at full hint tokens, hints) until the deck is empty, so every card is
        dealt and the game cannot end early.
        """
        ph, cfg = self.ph, self.cfg
        st = self.game.new_initial_state()
        while not st.is_terminal():
            if st.cur_player() == ph.CHANCE_PLAYER_ID:
                st.deal_random_card()
                continue
            legal = st.legal_moves()
            discards = [m for m in legal if m.type() == ph.HanabiMoveType.DISCARD]
            hints = [
                m
                for m in legal
                if m.type() in (ph.HanabiMoveType.REVEAL_COLOR, ph.HanabiMoveType.REVEAL_RANK)
            ]
            st.apply_move((discards or hints or legal)[0])
        found: dict[int, Any] = {}
        for item in st.move_history():
            mv = item.move()
            if mv.type() == ph.HanabiMoveType.DEAL:
                found.setdefault(mv.color() * cfg.ranks + mv.rank(), mv)
        if len(found) != cfg.card_types:
            raise RuntimeError(f"harvested {len(found)} of {cfg.card_types} HLE deal moves for {cfg}")
        return [found[c] for c in range(cfg.card_types)]

    # -- dealing and moving
    def new_state(self, deck) -> HLEState:
        """An HLE state after the initial deal of `deck` (card ids in deal order, length N)."""
        deck = np.asarray(torch.as_tensor(deck).cpu(), dtype=np.int64).reshape(-1)
        engine.check_decks(self.cfg, torch.from_numpy(deck)[None])  # HLE aborts on impossible deals
        st = HLEState(self, self.game.new_initial_state(), deck)
        self._deal(st)
        return st

    def _deal(self, st: HLEState) -> None:
        chance = self.ph.CHANCE_PLAYER_ID
        while st.state.cur_player() == chance:
            st.state.apply_move(self.deal_moves[int(st.deck[st.deck_pos])])

    def apply(self, st: HLEState, move: int) -> float:
        """Apply move id `move` and the deals that follow it; returns HLE's reward (score change)."""
        if not 0 <= move < self.cfg.num_moves:
            raise ValueError(f"move {move} outside 0..{self.cfg.num_moves - 1}")
        before = st.state.score()
        st.state.apply_move(self.moves[move])
        self._deal(st)
        return float(st.state.score() - before)

    # -- views
    def legal_mask(self, st: HLEState) -> np.ndarray:
        """[M] bool from HLE's legal_moves() (HLE lists moves even at terminal states)."""
        out = np.zeros(self.cfg.num_moves, dtype=bool)
        for m in st.state.legal_moves():
            out[self.game.get_move_uid(m)] = True
        return out

    def legal_mask_fast(self, st: HLEState) -> np.ndarray:
        """legal_mask through HLE's MoveIsLegal per move id, which is how HLE builds legal_moves()
        (tests check that the two agree); three times faster."""
        is_legal, c_state = self.ph.lib.MoveIsLegal, st.state._state
        return np.array([is_legal(c_state, m.c_move) for m in self.moves], dtype=bool)

    def observe(self, st: HLEState, player: int) -> np.ndarray:
        """HLE's canonical observation for `player`, [D] uint8.

        Calls the C encoder directly and parses its "0,1,..." string with numpy: the same bits as
        ObservationEncoder.encode, ten times faster.
        """
        lib = self.ph.lib
        lib.NewObservation(st.state._state, player, self._c_obs)
        c_str = lib.EncodeObservation(self.encoder._encoder, self._c_obs)
        lib.DeleteObservation(self._c_obs)
        raw = self.ph.ffi.string(c_str)
        lib.DeleteString(c_str)
        return np.frombuffer(raw, dtype=np.uint8)[::2] - ord("0")

    def observe_all(self, st: HLEState) -> np.ndarray:
        """[P, D] uint8, player 0 first."""
        return np.stack([self.observe(st, p) for p in range(self.cfg.players)])


@cache
def hle_game(cfg: GameConfig) -> HLEGame:
    """The cached HLEGame for a config (kept for the life of the process, so its states stay valid)."""
    return HLEGame(cfg)


# ---- conversions ----------------------------------------------------------------------------------
def hle_history(cfg: GameConfig, hle_state) -> tuple[list[int], list[int]]:
    """(dealt card ids in deal order, move ids) from an HLE state's move history."""
    ph = import_pyhanabi()
    game = hle_game(cfg).game
    dealt, moves = [], []
    for item in _raw(hle_state).move_history():
        mv = item.move()
        if mv.type() == ph.HanabiMoveType.DEAL:
            dealt.append(mv.color() * cfg.ranks + mv.rank())
        else:
            moves.append(game.get_move_uid(mv))
    return dealt, moves


def complete_deck(cfg: GameConfig, dealt: list[int]) -> list[int]:
    """Dealt cards followed by the undealt ones in card-id order (HLE does not fix the rest)."""
    left = list(cfg.card_counts)
    for c in dealt:
        left[c] -= 1
    if min(left) < 0:
        raise ValueError(f"dealt cards {dealt} are not a sub-multiset of the deck of {cfg}")
    return list(dealt) + [c for c in range(cfg.card_types) for _ in range(left[c])]


def _raw(hle_state):
    return hle_state.state if isinstance(hle_state, HLEState) else hle_state


def from_hle(cfg: GameConfig, hle_state, deck=None) -> HanabiState:
    """Our HanabiState (batch of 1) equal to an HLE state.

    `deck` gives the undealt order; by default an HLEState's own deck, else the dealt cards followed
    by the rest in card-id order (the part no one has seen, so any order is consistent).
    """
    ph = import_pyhanabi()
    raw = _raw(hle_state)
    p, h, c, r = cfg.players, cfg.hand_size, cfg.colors, cfg.ranks
    dealt, moves = hle_history(cfg, raw)
    if deck is None:
        deck = hle_state.deck if isinstance(hle_state, HLEState) else complete_deck(cfg, dealt)
    deck = np.asarray(torch.as_tensor(deck).cpu(), dtype=np.int64).reshape(-1)
    if list(deck[: len(dealt)]) != dealt:
        raise ValueError("deck does not start with the cards this HLE state dealt")

    hands = np.full((p, h), -1, dtype=np.int64)
    cp = np.ones((p, h, c), dtype=bool)
    rp = np.ones((p, h, r), dtype=bool)
    ch = np.full((p, h), -1, dtype=np.int64)
    rh = np.full((p, h), -1, dtype=np.int64)
    for pl, hand in enumerate(raw.player_hands()):
        for s, card in enumerate(hand):
            hands[pl, s] = card.color() * r + card.rank()
        obs = raw.observation(pl)  # keep it alive: the knowledge objects point into it
        for s, k in enumerate(obs.card_knowledge()[0]):  # own hand, observer-relative 0
            cp[pl, s] = [k.color_plausible(i) for i in range(c)]
            rp[pl, s] = [k.rank_plausible(i) for i in range(r)]
            ch[pl, s] = -1 if k.color() is None else k.color()
            rh[pl, s] = -1 if k.rank() is None else k.rank()
    discards = np.zeros(cfg.card_types, dtype=np.int64)
    for card in raw.discard_pile():
        discards[card.color() * r + card.rank()] += 1

    # turns_left: HLE counts down once per move that starts with an empty deck.
    turns_left, undealt = p, cfg.num_cards
    last = None
    for item in raw.move_history():
        mv = item.move()
        if mv.type() == ph.HanabiMoveType.DEAL:
            undealt -= 1
            continue
        turns_left -= undealt == 0
        last = item
    last_player, last_move, last_card = -1, -1, -1
    last_reveal = np.zeros(h, dtype=bool)
    last_scored = last_info_gain = False
    if last is not None:
        mv = last.move()
        last_player, last_move = last.player(), moves[-1]
        if mv.type() in (ph.HanabiMoveType.PLAY, ph.HanabiMoveType.DISCARD):
            last_card = last.color() * r + last.rank()
            last_scored = last.scored()
            last_info_gain = mv.type() == ph.HanabiMoveType.PLAY and last.information_token()
        else:
            last_reveal[last.card_info_revealed()] = True

    def t(x, dtype=torch.long) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x)).to(dtype)[None]

    return HanabiState(
        deck=t(deck),
        deck_pos=t(cfg.num_cards - raw.deck_size()),
        hands=t(hands),
        color_plausible=t(cp, torch.bool),
        rank_plausible=t(rp, torch.bool),
        color_hinted=t(ch),
        rank_hinted=t(rh),
        fireworks=t(raw.fireworks()),
        discards=t(discards),
        info_tokens=t(raw.information_tokens()),
        life_tokens=t(raw.life_tokens()),
        cur_player=t(raw.cur_player()),
        turns_left=t(turns_left),
        score=t(raw.score() if cfg.bomb_zero else sum(raw.fireworks())),
        done=t(raw.is_terminal(), torch.bool),
        num_steps=t(len(moves)),
        last_player=t(last_player),
        last_move=t(last_move),
        last_card=t(last_card),
        last_reveal=t(last_reveal, torch.bool),
        last_scored=t(last_scored, torch.bool),
        last_info_gain=t(last_info_gain, torch.bool),
    )


def to_hle(cfg: GameConfig, state: HanabiState, moves, row: int = 0, check: bool = True) -> HLEState:
    """The HLE state reached by dealing state.deck[row] and replaying `moves` (the game's move ids).

    Our state does not keep its history, so the moves that led to it are needed; with check=True
    the result is converted back and must equal state[row].
    """
    g = hle_game(cfg)
    st = g.new_state(state.deck[row])
    for m in [int(x) for x in torch.as_tensor(moves).reshape(-1)]:
        if st.state.is_terminal():
            raise ValueError(f"move {m} given after the game ended")
        g.apply(st, m)
    if check:
        back = from_hle(cfg, st)
        want = state.index(torch.tensor([row], device=state.device)).to("cpu")
        if not back.equal(want):
            raise ValueError(f"replaying {len(moves)} moves in HLE does not reach row {row} of the state")
    return st


def record_from_hle(cfg: GameConfig, hle_state) -> GameRecord:
    """A GameRecord of the game an HLE state has played (e.g. an rl_env game)."""
    dealt, moves = hle_history(cfg, hle_state)
    deck = hle_state.deck.tolist() if isinstance(hle_state, HLEState) else complete_deck(cfg, dealt)
    raw = _raw(hle_state)
    score = raw.score() if cfg.bomb_zero else sum(raw.fireworks())
    return GameRecord(cfg.to_dict(), [int(x) for x in deck], moves, int(score) if raw.is_terminal() else None)


# ---- rl_env agents --------------------------------------------------------------------------------
def make_rl_env(cfg: GameConfig, seed: int = -1):
    """HLE's rl_env.HanabiEnv for a config (seed -1: HLE draws one)."""
    import_pyhanabi()
    from hanabi_learning_environment import rl_env

    return rl_env.HanabiEnv(config={**cfg.hle_params(), "seed": seed})


class RlEnvAgent:
    """Plays HLE's rl_env with one of our observation policies (rl_env's duck-typed Agent API).

    act() gets one player's observation dict and returns rl_env's move dict on that player's turn,
    None otherwise. The policy sees exactly what rl_env shows the player: the canonical vector and
    the legal moves. Seeds for its randomness are hash(seed, moves made by this agent).
    """

    def __init__(self, cfg: GameConfig, policy: ObsPolicy, seed: int = 0, device: torch.device | str = "cpu"):
        self.cfg, self.policy, self.seed = cfg, policy, seed
        self.device = torch.device(device)
        game = hle_game(cfg).game
        self._move_dicts = [game.get_move(m).to_dict() for m in range(cfg.num_moves)]
        self.moves_made = 0

    def reset(self, config: dict | None = None) -> None:
        self.moves_made = 0

    def act(self, observation: dict) -> dict | None:
        if observation["current_player_offset"] != 0:
            return None
        vec = observation["vectorized"]
        if len(vec) != self.cfg.obs_dim:
            raise ValueError(f"observation has {len(vec)} features, {self.cfg} expects {self.cfg.obs_dim}")
        obs = torch.tensor(vec, dtype=torch.float32, device=self.device)[None]
        legal = torch.zeros(1, self.cfg.num_moves, dtype=torch.bool, device=self.device)
        legal[0, list(observation["legal_moves_as_int"])] = True
        seeds = hash_keys(torch.tensor([self.seed], device=self.device), self.moves_made)
        move = int(self.policy(self.cfg, obs, legal, seeds)[0])
        if not legal[0, move]:
            raise ValueError(f"policy chose illegal move {move} {self.cfg.move_name(move)}")
        self.moves_made += 1
        return dict(self._move_dicts[move])


def play_rl_env(cfg: GameConfig, env, agents: list, max_steps: int | None = None) -> GameRecord:
    """Play one rl_env game with one agent per player; returns its record (deck: dealt cards first)."""
    if len(agents) != cfg.players:
        raise ValueError(f"need {cfg.players} agents, got {len(agents)}")
    for a in agents:
        a.reset()
    obs = env.reset()
    done, steps = False, 0
    limit = max_steps if max_steps is not None else cfg.max_steps
    while not done:
        if steps >= limit:
            raise RuntimeError(f"rl_env game did not end in {limit} steps")
        cur = obs["current_player"]
        actions = [a.act(o) for a, o in zip(agents, obs["player_observations"], strict=True)]
        if any(x is not None for i, x in enumerate(actions) if i != cur) or actions[cur] is None:
            raise RuntimeError(f"agents answered out of turn at step {steps}: {actions}")
        obs, _, done, _ = env.step(actions[cur])
        steps += 1
    return record_from_hle(cfg, env.state)


# ---- differential check against HLE ---------------------------------------------------------------
EDGE_CASES = (
    "max_score",  # a game reached the maximum score
    "bombed_out",  # a game lost its last life
    "final_round",  # a game ended because the deck ran out
    "complete_at_max_info",  # a firework completed with full hint tokens (no token back)
    "complete_below_max_info",  # a firework completed and returned a hint token
    "discard_to_max_info",  # a discard that filled the hint tokens
    "zero_info",  # a player had to move with no hint tokens
    "short_hand",  # a move left a player with fewer cards than the hand size (empty deck)
)


@dataclass
class Mismatch:
    """The first disagreement between our engine and HLE in one game."""

    step: int
    game: int
    observer: int | None
    what: str  # e.g. "observation section board.info", "legal moves", "reward"
    ours: Any
    hle: Any
    record: GameRecord

    def __str__(self) -> str:
        who = "" if self.observer is None else f", observer {self.observer}"
        where = f"step {self.step}, game {self.game}{who}"
        return f"{where}: {self.what} differs: ours {self.ours} vs HLE {self.hle}"


@dataclass
class DiffReport:
    games: int = 0
    steps: int = 0
    seconds: float = 0.0
    mismatches: list[Mismatch] = field(default_factory=list)
    edges: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EDGE_CASES, 0))
    score_sum: int = 0

    def merge(self, other: DiffReport) -> DiffReport:
        return DiffReport(
            self.games + other.games,
            self.steps + other.steps,
            self.seconds + other.seconds,
            self.mismatches + other.mismatches,
            {k: self.edges[k] + other.edges[k] for k in self.edges},
            self.score_sum + other.score_sum,
        )


def _edge_counts(
    cfg: GameConfig, before: HanabiState, after: HanabiState, moves: torch.Tensor
) -> torch.Tensor:
    """[len(EDGE_CASES)] counts of edge cases hit by this step (tensor ops, one sync by the caller)."""
    tb = engine.tables(cfg, before.device)
    active = ~before.done
    kind = tb.move_type[moves.clamp(min=0)]
    completed = active & after.last_scored & (after.fireworks.sum(1) > before.fireworks.sum(1))
    completed = completed & (tb.card_rank[after.last_card.clamp(min=0)] == cfg.ranks - 1)
    ended = active & after.done
    full = before.info_tokens == cfg.max_info_tokens
    short = ((after.hands >= 0).sum(2) < cfg.hand_size).any(1)
    flags = [
        ended & (after.fireworks.sum(1) == cfg.max_score),
        ended & (after.life_tokens == 0),
        ended & (after.turns_left <= 0) & (after.life_tokens > 0) & (after.fireworks.sum(1) < cfg.max_score),
        completed & full,
        completed & ~full,
        active & (kind == DISCARD) & (after.info_tokens == cfg.max_info_tokens),
        active & (before.info_tokens == 0),
        active & short,
    ]
    return torch.stack([f.long().sum() for f in flags])


def differential(
    cfg: GameConfig,
    policy: StatePolicy,
    seeds: torch.Tensor,
    device: torch.device | str = "cpu",
    observations: bool = True,
    max_mismatches: int = 1,
) -> DiffReport:
    """Play len(seeds) games in lockstep in our engine (batched) and in HLE (one state per game) with
    moves from `policy`, and compare before every move and at the end, for every observer: legal
    moves (non-terminal states), the canonical observation, hint and life tokens, fireworks, deck
    size, current player, score, reward and termination.

    HLE always scores 0 after the last life; with cfg.bomb_zero False our score keeps the fireworks,
    so there HLE's score and reward are compared with the bomb-zero view of ours.
    Stops after max_mismatches games disagreed (each game reports its first disagreement only).
    """
    start = time.perf_counter()
    g = hle_game(cfg)
    dev = torch.device(device)
    seeds = seeds.long().to(dev)
    state = engine.reset(cfg, seeds)
    b = state.batch_size
    decks = state.deck.cpu().numpy()
    hs = [g.new_state(decks[i]) for i in range(b)]
    history: list[np.ndarray] = []
    report = DiffReport(games=b)
    edges = torch.zeros(len(EDGE_CASES), dtype=torch.long, device=dev)
    bad = np.zeros(b, dtype=bool)  # games that already disagreed (skipped afterwards)
    checked_end = np.zeros(b, dtype=bool)
    step = 0

    def record(i: int, upto: int) -> GameRecord:
        moves = [int(history[t][i]) for t in range(upto)]
        return GameRecord(cfg.to_dict(), decks[i].tolist(), moves, None)

    def fail(i: int, observer: int | None, what: str, ours, theirs, upto: int) -> None:
        bad[i] = True
        report.mismatches.append(Mismatch(step, i, observer, what, ours, theirs, record(i, upto)))

    def hle_score(score: np.ndarray, lives: np.ndarray) -> np.ndarray:
        return score if cfg.bomb_zero else np.where(lives > 0, score, 0)

    prev_hscore = prev_score = rewards = rewards_hle = np.zeros(b)
    while True:
        done = state.done.cpu().numpy()
        legal = engine.legal_moves(cfg, state).cpu().numpy()
        obs = encode(cfg, state, dtype=torch.uint8).cpu().numpy() if observations else None
        info, lives = state.info_tokens.cpu().numpy(), state.life_tokens.cpu().numpy()
        fw, cur = state.fireworks.cpu().numpy(), state.cur_player.cpu().numpy()
        score, deck_size = state.score.cpu().numpy(), cfg.num_cards - state.deck_pos.cpu().numpy()
        hscore = hle_score(score, lives)
        for i in np.nonzero(~bad & ~checked_end)[0]:
            st, hst = hs[i], hs[i].state
            if step > 0:
                # our reward is our score change; HLE's is the change of its (bomb-zero) score
                if rewards[i] != score[i] - prev_score[i]:
                    fail(i, None, "reward vs score change", rewards[i], score[i] - prev_score[i], step)
                    continue
                r = rewards[i] if cfg.bomb_zero else float(hscore[i] - prev_hscore[i])
                if rewards_hle[i] != r:
                    fail(i, None, "reward", r, rewards_hle[i], step)
                    continue
            if not cfg.bomb_zero and score[i] != fw[i].sum():
                fail(i, None, "score (bomb_zero=False keeps the fireworks)", score[i], fw[i].sum(), step)
                continue
            checks = (
                ("termination", bool(done[i]), hst.is_terminal()),
                ("current player", int(cur[i]), hst.cur_player()),
                ("info tokens", int(info[i]), hst.information_tokens()),
                ("life tokens", int(lives[i]), hst.life_tokens()),
                ("fireworks", fw[i].tolist(), hst.fireworks()),
                ("deck size", int(deck_size[i]), hst.deck_size()),
                ("score", int(hscore[i]), hst.score()),
            )
            wrong = next((c for c in checks if c[1] != c[2]), None)
            if wrong is not None:
                fail(i, None, wrong[0], wrong[1], wrong[2], step)
                continue
            if not done[i]:
                hl = g.legal_mask_fast(st)
                if not np.array_equal(hl, legal[i]):
                    diff = np.nonzero(hl != legal[i])[0]
                    names = [cfg.move_name(int(m)) for m in diff[:4]]
                    fail(
                        i,
                        int(cur[i]),
                        f"legal moves {names}",
                        legal[i][diff[:4]].tolist(),
                        hl[diff[:4]].tolist(),
                        step,
                    )
                    continue
            if observations:
                for o in range(cfg.players):
                    ho = g.observe(st, o)
                    if not np.array_equal(ho, obs[i, o]):
                        k = int(np.nonzero(ho != obs[i, o])[0][0])
                        section = cfg.layout.section_of(k)
                        fail(
                            i,
                            o,
                            f"observation section {section} (feature {k})",
                            int(obs[i, o, k]),
                            int(ho[k]),
                            step,
                        )
                        break
            checked_end[i] |= bool(done[i])
        if len(report.mismatches) >= max_mismatches or bool(done.all()):
            break
        moves = policy(cfg, state, seeds).long()
        new, reward, _ = engine.step(cfg, state, moves, checked=True)
        rewards = reward.cpu().numpy()
        edges += _edge_counts(cfg, state, new, moves)
        mv = moves.cpu().numpy()
        history.append(mv)
        rewards_hle = np.zeros(b)
        for i in np.nonzero(~done & ~bad)[0]:
            rewards_hle[i] = g.apply(hs[i], int(mv[i]))
        prev_hscore, prev_score = hscore, score
        report.steps += int((~done).sum())
        state = new
        step += 1
    report.edges = dict(zip(EDGE_CASES, edges.cpu().tolist(), strict=True))
    report.score_sum = int(state.score.sum())
    report.seconds = time.perf_counter() - start
    return report
