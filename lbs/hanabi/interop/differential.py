"""The differential tester: play the same decks and moves in our engine and in HLE and compare
everything observable before every move (legal moves, every observer's canonical observation,
tokens, board, reward, score, termination)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .. import engine
from ..config import DISCARD, GameConfig
from ..encode import encode
from ..policies import StatePolicy
from ..state import HanabiState
from .hle import hle_game
from .record import GameRecord

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
