"""Regenerate the golden fixtures from hanabi-learning-environment (HLE).

For every config in lbs.hanabi.variants.VARIANTS:
  tests/hanabi/fixtures/<name>.npz             a few games: decks, moves and, before every move and at the
                                        end, HLE's legal moves, every player's canonical observation
                                        (bit-packed) and the scalars (tokens, fireworks, ...)
  tests/hanabi/fixtures/playthroughs/<name>.txt one short game as text: HLE's own state printout after each
                                        move, HLE's move names and rewards

Moves come from lbs.hanabi.policies.conformance_policy played in our engine; every value stored comes
from HLE replaying those moves, so tests/hanabi/test_fixtures.py checks our engine against HLE on machines
where HLE cannot be built.
Usage: python tests/hanabi/make_fixtures.py [--games 16] [--out tests/hanabi/fixtures]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lbs.hanabi import engine
from lbs.hanabi.config import DISCARD, PLAY, GameConfig
from lbs.hanabi.interop.hle import HLEState, hle_game
from lbs.hanabi.interop.record import GameRecord, records_from_batch
from lbs.hanabi.interop.text import format_playthrough
from lbs.hanabi.policies import conformance_policy
from lbs.hanabi.variants import VARIANTS

SCALARS = ("info_tokens", "life_tokens", "cur_player", "deck_size", "score", "terminal", "reward")


@dataclass
class Args:
    games: int = 20  # games per config (the fixtures stay well under 2 MB in total)
    out: str = "tests/hanabi/fixtures"
    seed: int = 20240  # seeds are seed + config index * 1000 + game index


def play_records(cfg: GameConfig, seeds: torch.Tensor) -> list[GameRecord]:
    """Whole games in our engine with the conformance policy (one style per game, by seed)."""
    policy = conformance_policy()
    state = engine.reset(cfg, seeds)
    moves = []
    while not bool(state.done.all()):
        mv = policy(cfg, state, seeds)
        moves.append(torch.where(state.done, -1, mv))
        state, _, _ = engine.step(cfg, state, mv, checked=True)
    return records_from_batch(cfg, state.deck, torch.stack(moves, 1), state.num_steps, state.score)


def hle_rows(cfg: GameConfig, record: GameRecord) -> tuple[list, list, list, HLEState]:
    """HLE's view before every move of a record and at its end: observations, legal masks, scalars."""
    g = hle_game(cfg)
    st = g.new_state(record.deck)
    obs, legal, scalars = [], [], []
    reward = 0
    for t in range(len(record.moves) + 1):
        raw = st.state
        obs.append(g.observe_all(st).reshape(-1))
        legal.append(g.legal_mask(st))
        scalars.append(
            [
                raw.information_tokens(),
                raw.life_tokens(),
                raw.cur_player(),
                raw.deck_size(),
                raw.score(),
                int(raw.is_terminal()),
                reward,
            ]
            + raw.fireworks()
        )
        if t == len(record.moves):
            break
        m = record.moves[t]
        if raw.is_terminal() or not legal[-1][m]:
            raise RuntimeError(f"{cfg}: move {t} {cfg.move_name(m)} is not legal in HLE")
        reward = int(g.apply(st, m))
    if not st.state.is_terminal():
        raise RuntimeError(f"{cfg}: HLE's game has not ended after the recorded moves")
    return obs, legal, scalars, st


def write_fixture(name: str, cfg: GameConfig, records: list[GameRecord], path: Path) -> None:
    obs, legal, scalars, lengths = [], [], [], []
    for r in records:
        o, l_, s, _ = hle_rows(cfg, r)
        obs += o
        legal += l_
        scalars += s
        lengths.append(len(r.moves))
    moves = np.full((len(records), max(lengths)), -1, dtype=np.int16)
    for i, r in enumerate(records):
        moves[i, : len(r.moves)] = r.moves
    np.savez_compressed(
        path,
        name=np.array(name),
        config=np.array(json.dumps(cfg.to_dict(), sort_keys=True)),
        decks=np.array([r.deck for r in records], dtype=np.int8),
        moves=moves,
        lengths=np.array(lengths, dtype=np.int16),
        obs=np.packbits(np.array(obs, dtype=np.uint8), axis=1),
        obs_bits=np.array(cfg.players * cfg.obs_dim),
        legal=np.packbits(np.array(legal, dtype=np.uint8), axis=1),
        scalars=np.array(scalars, dtype=np.int8),
        scalar_names=np.array(list(SCALARS) + [f"fireworks{c}" for c in range(cfg.colors)]),
    )


def pick_playthrough(cfg: GameConfig, records: list[GameRecord]) -> GameRecord:
    """The shortest game with a play, a discard and a hint (and, without bomb_zero, no bomb-out,
    where HLE's score would differ from ours by design); the shortest game if none has all."""

    def kinds(r: GameRecord) -> set[int]:
        return {cfg.move_table[m][0] for m in r.moves}

    def ok(r: GameRecord) -> bool:
        varied = {DISCARD, PLAY} <= kinds(r) and len(kinds(r)) >= 3
        return varied and (cfg.bomb_zero or hle_rows(cfg, r)[3].state.life_tokens() > 0)

    good = [r for r in records if ok(r)] or records
    return min(good, key=lambda r: len(r.moves))


def write_playthrough(name: str, cfg: GameConfig, record: GameRecord, path: Path) -> None:
    """HLE's printout of every state, HLE's move names and rewards, in format_playthrough's layout."""
    g = hle_game(cfg)
    st = g.new_state(record.deck)
    states, moves = [str(st.state)], []
    for m in record.moves:
        player = st.state.cur_player()
        reward = int(g.apply(st, m))
        moves.append((str(g.moves[m]), player, reward))
        states.append(str(st.state))
    text = format_playthrough(record, name, states, moves, st.state.score(), st.state.is_terminal())
    path.write_text(text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--games", type=int, default=Args.games)
    p.add_argument("--out", default=Args.out)
    p.add_argument("--seed", type=int, default=Args.seed)
    args = Args(**vars(p.parse_args(argv)))
    torch.set_num_threads(1)
    out = Path(args.out)
    (out / "playthroughs").mkdir(parents=True, exist_ok=True)
    total = 0
    for k, (name, cfg) in enumerate(VARIANTS.items()):
        seeds = args.seed + 1000 * k + torch.arange(args.games)
        records = play_records(cfg, seeds)
        write_fixture(name, cfg, records, out / f"{name}.npz")
        write_playthrough(name, cfg, pick_playthrough(cfg, records), out / "playthroughs" / f"{name}.txt")
        size = (out / f"{name}.npz").stat().st_size
        total += size
        steps = sum(len(r.moves) for r in records)
        print(f"{name}: {len(records)} games, {steps} moves, {size / 1024:.0f} KiB")
    print(f"total {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
