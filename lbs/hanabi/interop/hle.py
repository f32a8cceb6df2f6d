"""Bridge to hanabi-learning-environment (HLE): deal chosen decks, convert states both ways, replay
records.

HLE is imported lazily, so the rest of the package works without it. HLE has no "deal this card"
call; a deal move taken from an earlier game's history deals that card, so applying one deal move per
card id in deck order reproduces any deck. HLE states point into their HanabiGame: an HLEGame keeps
it alive (and is cached per GameConfig, so it lives as long as the process).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import torch

from .. import engine
from ..config import GameConfig
from ..state import HanabiState
from .record import GameRecord

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


def replay_hle(record: GameRecord):
    """The record replayed in HLE: an HLEState (needs hanabi-learning-environment)."""
    cfg = record.cfg
    g = hle_game(cfg)
    st = g.new_state(record.deck)
    for t, m in enumerate(record.moves):
        if st.state.is_terminal():
            raise ValueError(f"record has moves after its game ended (move {t})")
        if not g.legal_mask(st)[m]:
            raise ValueError(f"move {t}: {cfg.move_name(m)} is illegal in HLE")
        g.apply(st, m)
    return st
