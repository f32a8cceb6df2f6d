"""Named random streams: disjoint by construction, and each consumer draws from its own."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from lbs import seeding
from lbs.belief.config import PRESETS as BELIEF_PRESETS
from lbs.belief.data import BeliefData
from lbs.hanabi import GameConfig, engine
from lbs.models import NetConfig, make_qnet
from lbs.rl.actors import ActorConfig
from lbs.rl.trainer import PRESETS, Trainer
from lbs.scoring import evaluate
from lbs.seeding import Stream, game_seeds, pack, stream_of

GAME = GameConfig(players=2, colors=1, ranks=3, hand_size=2)


def test_packing_is_injective_and_bounded():
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(0, len(Stream), (4000,), generator=g)
    seed = torch.randint(0, seeding.MAX_SEED + 1, (4000,), generator=g)
    index = torch.randint(0, seeding.MAX_INDEX + 1, (4000,), generator=g)
    triples = list(zip(stream.tolist(), seed.tolist(), index.tolist(), strict=True))
    keys = torch.stack([pack(Stream(s), r, i) for s, r, i in triples])
    assert len(set(keys.tolist())) == len(set(triples))  # distinct inputs, distinct keys
    assert torch.equal(stream_of(keys), stream) and (keys >= 0).all()
    assert torch.equal(game_seeds(Stream.EVAL, 0, 5), torch.arange(5))  # seed 0's scoring games: 0, 1, ...
    with pytest.raises(ValueError, match="seed must be in"):
        game_seeds(Stream.EVAL, seeding.MAX_SEED + 1, 3)
    with pytest.raises(ValueError, match="seed must be in"):
        game_seeds(Stream.EVAL, -1, 3)


def test_rank_seeds_keep_rank_0_and_never_coincide():
    seeds, ranks = [0, 1, 7, seeding.MAX_SEED], [0, 1, 2, 63]
    assert [seeding.rank_seed(s, 0) for s in seeds] == seeds  # one device keeps its replay draws
    keys = {seeding.rank_seed(s, r) for s in seeds for r in ranks}
    assert len(keys) == len(seeds) * len(ranks)
    with pytest.raises(ValueError, match="seed must be in"):
        seeding.rank_seed(seeding.MAX_SEED + 1, 1)


@pytest.fixture
def dealt(monkeypatch):
    """Every game seed that reaches engine.reset or engine.set_hand, by caller."""
    seen: list[torch.Tensor] = []
    real_reset, real_set_hand = engine.reset, engine.set_hand

    def reset(cfg, seeds, episodes=None):
        seen.append(seeds.clone())
        return real_reset(cfg, seeds, episodes)

    def set_hand(cfg, state, player, cards, seeds):
        seen.append(seeds.clone())
        return real_set_hand(cfg, state, player, cards, seeds)

    monkeypatch.setattr(engine, "reset", reset)
    monkeypatch.setattr(engine, "set_hand", set_hand)

    def take() -> torch.Tensor:
        out = torch.cat(seen)
        seen.clear()
        return out

    return take


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_trainers_evaluation_and_reshuffles_never_share_a_deal_stream(dealt, tmp_path, seed, monkeypatch):
    """For the same run seed, the blueprint trainer's games, its validation, the belief trainer's games,
    scoring and search reshuffles all hash keys from different streams."""
    torch.set_num_threads(1)
    cfg = replace(PRESETS["tiny"], game=GAME, net=NetConfig(hidden=8, lstm_layers=1, mlp_layers=1),
                  actor=ActorConfig(num_games=4, max_len=GAME.max_steps), seed=seed, eval_games=4,
                  out_dir=str(tmp_path), wandb_mode="disabled")
    trainer = Trainer(cfg, progress=False)
    trainer.selfplay.act_round()
    by = {"blueprint train": dealt()}
    trainer.evaluate(4)
    by["blueprint validation"] = dealt()
    net = make_qnet(GAME, cfg.net).eval()
    bcfg = replace(BELIEF_PRESETS["tiny"], games_per_round=4, seed=seed)
    BeliefData(bcfg, GAME, net, cfg.actor).play_round(0)
    by["belief train"] = dealt()
    evaluate(GAME, net.step, net.initial_state, games=4, seed=seed)
    by["evaluation"] = dealt()
    st = engine.reset(GAME, game_seeds(Stream.EVAL, seed, 4))
    dealt()
    first: list[torch.Tensor] = []  # the first hashed component of every reshuffle
    real_keys = engine.permutation_keys

    def spy(n, *parts):
        first.append(parts[0])
        return real_keys(n, *parts)

    monkeypatch.setattr(engine, "permutation_keys", spy)
    # even the evaluation games' own seeds as reshuffle keys cannot reach a deal's key
    engine.set_hand(GAME, st, torch.zeros(4, dtype=torch.long), st.hands[:, 0], by["evaluation"][:4])
    dealt()
    by["reshuffle"] = torch.cat(first)
    streams = {k: set(stream_of(v).tolist()) for k, v in by.items()}
    assert all(len(s) == 1 for s in streams.values()), streams
    values = [next(iter(s)) for s in streams.values()]
    assert len(set(values)) == len(values), streams  # one stream each, all different
    keys = {k: set(v.tolist()) for k, v in by.items()}
    names = list(keys)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not keys[a] & keys[b], (a, b)


def test_game_numbers_past_the_seeds_index_are_refused_before_any_game():
    from lbs import cli

    last = seeding.MAX_INDEX
    cli.games(1, last)  # the last game there is
    cli.games(last + 1)  # every game from 0
    for games, first, words in ((0, 0, "--games 0: must be >= 1"),
                                (2, last, f"--games 2 from --first-game {last}"),
                                (2**64, 0, f"--games {2**64}: games beyond number {last}"),
                                (1, 2**32, f"--first-game {2**32}: must be in 0..{last}"),
                                (1, -1, "--first-game -1")):
        with pytest.raises(ValueError, match=words):
            cli.games(games, first)
    seeding.game_seeds(seeding.Stream.EVAL, 0, 1, last)  # the check agrees with the seeds' own
    with pytest.raises(ValueError):
        seeding.game_seeds(seeding.Stream.EVAL, 0, 2, last)
