"""Configs round-trip through plain dicts; files from before a field existed load as they were written."""

from __future__ import annotations

import pytest
import torch

from lbs import ckpt
from lbs.belief.config import BeliefTrainConfig
from lbs.configs import add_dataclass_args, apply_overrides, from_dict, to_dict
from lbs.hanabi import GameConfig
from lbs.models import BeliefConfig, BeliefModel, NetConfig, load_belief
from lbs.models.io import BELIEF_KIND
from lbs.rl.trainer import PRESETS, TrainConfig

GAME = GameConfig(players=2, colors=1, ranks=3, hand_size=2)


def test_nested_configs_round_trip():
    cfg = PRESETS["tiny"]
    assert from_dict(TrainConfig, to_dict(cfg)) == cfg
    net = NetConfig(kind="lstm", hidden=64, aux_head=True)
    assert from_dict(NetConfig, to_dict(net)) == net
    with pytest.raises(ValueError, match="unknown NetConfig fields"):
        from_dict(NetConfig, {**to_dict(net), "width": 3})


def test_a_literal_field_is_a_flag_with_choices(capsys):
    """A `Literal[...]` field (SearchConfig.knowledge) takes one of its values: --help lists them, another is
    refused by argparse in one line."""
    import argparse

    from lbs.search.config import SearchConfig

    ap = argparse.ArgumentParser(prog="p")
    add_dataclass_args(ap, SearchConfig, defaults=SearchConfig())
    assert "--knowledge {smartbot,none}" in ap.format_help()
    assert apply_overrides(SearchConfig(), ap.parse_args(["--knowledge", "smartbot"])).knowledge == "smartbot"
    assert apply_overrides(SearchConfig(), ap.parse_args([])).knowledge == "none"
    with pytest.raises(SystemExit):
        ap.parse_args(["--knowledge", "bogus"])
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "p: error: argument --knowledge: invalid choice: 'bogus' (choose from 'smartbot', " \
        "'none')"


def test_belief_saved_before_the_count_prior_loads_without_it(tmp_path):
    """The production loader, not a helper only tests call: a file without `count_prior` in its model
    config was trained without the prior, so it must load with the prior off."""
    old = BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=4, count_prior=False)
    model = BeliefModel(GAME, old)
    stored = to_dict(BeliefTrainConfig(model=old))
    del stored["model"]["count_prior"]
    path = ckpt.save(tmp_path / "old_belief.pt", BELIEF_KIND, {
        "config": stored, "game": GAME.to_dict(), "blueprint": {},
        "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
    })
    game, loaded = load_belief(path)
    assert game == GAME and loaded.cfg.count_prior is False
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v)
    # today's default is the prior on: a new config without the field means on
    assert BeliefConfig().count_prior is True
