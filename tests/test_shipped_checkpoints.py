"""The checkpoints in checkpoints/ load, are small fp16 files with a model card, and still do what their
cards say (on fewer games than the cards, so the bounds leave room for sampling noise)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lbs import ckpt
from lbs.belief.evaluate import evaluate_belief
from lbs.models import load_belief, load_blueprint
from lbs.scoring import evaluate

CHECKPOINTS = Path(__file__).resolve().parent.parent / "checkpoints"
BLUEPRINT, BELIEF = CHECKPOINTS / "blueprint_2p.pt", CHECKPOINTS / "belief_2p.pt"
SMARTBOT_BELIEFS = [CHECKPOINTS / f"belief_smartbot_{p}p.pt" for p in (2, 3, 4)]


@pytest.mark.parametrize("path", [BLUEPRINT, BELIEF, *SMARTBOT_BELIEFS], ids=lambda p: p.name)
def test_shipped_files_are_small_half_precision_and_carded(path):
    assert path.stat().st_size < 50 * 2**20
    assert path.with_suffix(".md").is_file()
    blob = ckpt.load(path, "blueprint" if path == BLUEPRINT else "belief")
    weights = blob["model"] if path == BLUEPRINT else blob["state_dict"]
    floats = [t for t in weights.values() if t.is_floating_point()]
    assert floats and all(t.dtype == torch.float16 for t in floats)


def test_shipped_blueprint_scores_as_its_card_says(one_thread):
    game, net = load_blueprint(BLUEPRINT)
    res = evaluate(game, net.step, net.initial_state, games=200, batch=200)
    assert 21.3 < res.mean < 22.9, res  # card: 22.07 +- 0.03 over 10,000 games


@pytest.mark.parametrize("belief, blueprint",
                         [(BELIEF, BLUEPRINT), *((b, "smartbot") for b in SMARTBOT_BELIEFS)],
                         ids=["belief_2p", *(b.stem for b in SMARTBOT_BELIEFS)])
def test_shipped_belief_beats_grounded_and_counting(one_thread, belief, blueprint):
    game, model = load_belief(belief, blueprint_path=blueprint)
    _, net = load_blueprint(blueprint, game=game)
    ev = evaluate_belief(game, model, net.step, net.initial_state, games=100, seed=2)
    assert ev.nll_learned < ev.nll_counting < ev.nll_grounded, ev
    live = [t for t, n in enumerate(ev.cards_by_turn) if n > 0]
    wins = sum(ev.learned_by_turn[t] < ev.grounded_by_turn[t] for t in live)
    assert wins > 0.9 * len(live), (wins, len(live))


def test_shipped_files_are_hashed_and_the_belief_finds_its_blueprint_from_anywhere(tmp_path, monkeypatch):
    from lbs.models import stored_blueprint_path

    for path in (BLUEPRINT, BELIEF):
        assert ckpt.read_header(path)["sha256"], path  # content hash verified on every load
    monkeypatch.chdir(tmp_path)  # not the repository root
    bp = stored_blueprint_path(ckpt.load(BELIEF, "belief"), BELIEF)
    assert bp.resolve() == BLUEPRINT.resolve()
    load_belief(BELIEF, blueprint_path=bp)


def test_score_measures_a_belief_on_another_blueprints_games(one_thread, capsys):
    """How far SmartBot's belief carries over to the shipped blueprint's games: scored, and said so; a
    belief of another game still fails with one line."""
    from train.score import main

    main([str(BLUEPRINT), "--belief", str(SMARTBOT_BELIEFS[0]), "--games", "20", "--device", "cpu"])
    out = capsys.readouterr().out
    assert "was trained for the rule bot 'smartbot'" in out and "scored on this blueprint's games" in out
    game, net = load_blueprint(BLUEPRINT)
    _, model = load_belief(SMARTBOT_BELIEFS[0], game=game)
    ev = evaluate_belief(game, model, net.step, net.initial_state, games=20, seed=0)
    assert f"belief: {ev}" in out  # this blueprint's games, not SmartBot's
    own = evaluate_belief(game, model, *_smartbot(game), games=20, seed=0)
    assert f"belief: {own}" not in out
    with pytest.raises(SystemExit, match="score: .*belief_smartbot_3p.pt"):
        main([str(BLUEPRINT), "--belief", str(SMARTBOT_BELIEFS[1]), "--games", "20", "--device", "cpu"])


def _smartbot(game):
    _, bot = load_blueprint("smartbot", game=game)
    return bot.step, bot.initial_state


def test_lbs_draws_within_smartbots_knowledge_whatever_the_belief_names(tmp_path):
    """The full-game blueprint learnt SmartBot's conventions and its belief names them (a record); the
    2-colour pair's names none. Either way LBS draws from the belief alone by default (--knowledge none) and
    within SmartBot's card knowledge with --knowledge smartbot (a SmartBot beside the network); a belief
    naming no rule bot fails to load in one line."""
    from lbs.bots import SmartBot
    from lbs.search.config import SearchConfig
    from lbs.search.setup import build_search

    _, model = load_belief(BELIEF, blueprint_path=BLUEPRINT)
    assert model.conventions == "smartbot"
    small = (CHECKPOINTS / "blueprint_2c.pt", CHECKPOINTS / "belief_2c.pt")
    assert load_belief(small[1], blueprint_path=small[0])[1].conventions == ""
    for blueprint, belief in ((BLUEPRINT, BELIEF), small):
        with build_search("lbs-inf", blueprint, belief) as setup:
            assert setup.cfg.knowledge == "none" and setup.sampler().knowledge is None
        with build_search("lbs-inf", blueprint, belief, cfg=SearchConfig(knowledge="smartbot")) as setup:
            knowledge = setup.sampler().knowledge
            assert isinstance(knowledge, SmartBot) and knowledge is not setup.net
            assert knowledge.game == setup.game
    blob = ckpt.load(BELIEF, "belief")
    bad = tmp_path / "belief.pt"
    ckpt.save(bad, "belief", {**blob, "conventions": "nobot"})
    with pytest.raises(ckpt.CheckpointError, match="names conventions 'nobot', not a rule bot"):
        load_belief(bad)
