"""Game records: a config, a deck order and the move ids, which fully determine a game.

Records replay in our engine (many at once) and in HLE (interop.hle.replay_hle), save to JSON, export
to hanab.live (interop.hanablive) and render as HLE's text trace (interop.text).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .. import engine
from ..config import GameConfig
from ..state import HanabiState


@dataclass
class GameRecord:
    """One game. config is GameConfig.to_dict(); deck the card ids in deal order; moves the move ids;
    score the final score (None for an unfinished game)."""

    config: dict
    deck: list[int]
    moves: list[int]
    score: int | None = None

    @property
    def cfg(self) -> GameConfig:
        return GameConfig.from_dict(self.config)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> GameRecord:
        missing = {"config", "deck", "moves"} - set(d)
        if missing:
            raise ValueError(f"game record lacks {sorted(missing)}")
        return cls(
            dict(d["config"]), [int(x) for x in d["deck"]], [int(x) for x in d["moves"]], d.get("score")
        )

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict()) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> GameRecord:
        return cls.from_dict(json.loads(Path(path).read_text()))


def save_records(records: list[GameRecord], path: str | Path) -> Path:
    """Many records in one JSON file (a list)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r.to_dict() for r in records]) + "\n")
    return path


def load_records(path: str | Path) -> list[GameRecord]:
    data = json.loads(Path(path).read_text())
    return [GameRecord.from_dict(d) for d in (data if isinstance(data, list) else [data])]


def records_from_batch(
    cfg: GameConfig,
    decks: torch.Tensor,
    moves: torch.Tensor,
    lengths: torch.Tensor,
    scores: torch.Tensor | None,
) -> list[GameRecord]:
    """Records from batched tensors: decks [B, N], moves [B, T] (first lengths[b] used), scores [B]."""
    d, m, n = decks.cpu().tolist(), moves.cpu().tolist(), lengths.cpu().tolist()
    s = scores.cpu().tolist() if scores is not None else [None] * len(d)
    return [GameRecord(cfg.to_dict(), d[i], m[i][: n[i]], s[i]) for i in range(len(d))]


# ---- replay in our engine -------------------------------------------------------------------------
def _batch(records: list[GameRecord], device) -> tuple[GameConfig, torch.Tensor, torch.Tensor, torch.Tensor]:
    if not records:
        raise ValueError("no records to replay")
    cfg = records[0].cfg
    for i, r in enumerate(records):
        if r.cfg != cfg:
            raise ValueError(
                f"record {i} has config {r.cfg}, record 0 has {cfg}; replay one config at a time"
            )
    decks = torch.tensor([r.deck for r in records], dtype=torch.long, device=device)
    engine.check_decks(cfg, decks)
    lengths = torch.tensor([len(r.moves) for r in records], dtype=torch.long, device=device)
    t = int(lengths.max())
    moves = torch.zeros(len(records), max(t, 1), dtype=torch.long, device=device)
    for i, r in enumerate(records):
        moves[i, : len(r.moves)] = torch.tensor(r.moves, dtype=torch.long)
    return cfg, decks, moves, lengths


def replay_steps(records: list[GameRecord], device: torch.device | str = "cpu"):
    """Replay records (one config) in lockstep. Yields (t, state, moves) before each step t, where
    moves [B] is -1 for games whose record has ended, and finally (T, final state, all -1).

    Illegal moves raise engine.IllegalMoveError naming the game; a record that goes on after its
    game ended raises ValueError.
    """
    cfg, decks, moves, lengths = _batch(records, torch.device(device))
    state = engine.initial_state(cfg, decks)
    t_max = int(lengths.max())
    for t in range(t_max + 1):
        active = t < lengths
        mv = torch.where(active, moves[:, min(t, moves.shape[1] - 1)], -1)
        yield t, state, mv
        if t == t_max:
            break
        over = active & state.done
        if bool(over.any()):
            i = int(over.nonzero()[0, 0])
            raise ValueError(f"record {i} has moves after its game ended (move {t})")
        new, _, _ = engine.step(cfg, state, mv.clamp(min=0), checked=True)
        state = new.where(active, state)


def replay(
    records: list[GameRecord], device: torch.device | str = "cpu", check_scores: bool = True
) -> HanabiState:
    """Final states [B] of records of one config, replayed together; checks recorded scores."""
    *_, (_, state, _) = replay_steps(records, device)
    if check_scores:
        for i, r in enumerate(records):
            if r.score is not None and (int(state.score[i]) != r.score or not bool(state.done[i])):
                raise ValueError(
                    f"record {i}: recorded score {r.score}, replay gives {int(state.score[i])} "
                    f"(finished: {bool(state.done[i])})"
                )
    return state
