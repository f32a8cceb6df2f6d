"""BAD's factorised Bayesian belief: exact where the factorisation is (one card in hand), never ruling the
true card out, reading nothing the searcher does not observe, and a sampler the search can draw from."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICES

from lbs.acting import Turn, play
from lbs.bots import SmartBot
from lbs.hanabi import GameConfig, engine
from lbs.infer import InferenceServer
from lbs.models import NetConfig, make_qnet
from lbs.search.bayes_belief import BayesBelief
from lbs.search.config import SearchConfig
from lbs.search.exact_range import ExactRange
from lbs.search.play import play_games
from lbs.search.setup import SearchSetup

pytestmark = pytest.mark.usefixtures("one_thread")
ONE_CARD = GameConfig(players=3, colors=2, ranks=3, hand_size=1)
TWO_CARDS = GameConfig(players=2, colors=2, ranks=3, hand_size=2)


def blueprint(game: GameConfig, device: str = "cpu", seed: int = 1) -> torch.nn.Module:
    torch.manual_seed(seed)
    return make_qnet(game, NetConfig(hidden=16, lstm_layers=1, mlp_layers=2)).to(device).eval()


def turns_of(game: GameConfig, net, n: int, seed: int, device: str = "cpu") -> list[Turn]:
    """n greedy blueprint games, every turn recorded."""
    turns: list[Turn] = []
    state = engine.reset(game, torch.arange(n, device=device) + 1000 * seed)
    with torch.no_grad():
        play(game, state, net.step, net.initial_state(n * game.players, device), game.max_steps,
             hook=turns.append)
    return turns


def range_marginals(rng: ExactRange, games: int, game: GameConfig) -> torch.Tensor:
    """[G, H, T] the exact range's per-slot card marginals."""
    hands, of, prob = rng.probabilities()
    out = torch.zeros(games, game.hand_size, game.card_types, dtype=torch.float64)
    for s in range(game.hand_size):
        held = hands[:, s] >= 0
        out[:, s].index_put_((of[held].cpu(), hands[held, s].cpu()), prob[held].cpu(), accumulate=True)
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_one_card_in_hand_the_bayesian_belief_is_the_exact_posterior(device: str) -> None:
    """With a single hidden card the factorisation is exact: after every move of 8 games, for every seat,
    the Bayesian marginals (no mix-in, no shrinking) equal the exact range's, which the partners' moves
    narrow."""
    game, n = ONE_CARD, 8
    net = blueprint(game, device)
    turns = turns_of(game, net, n, seed=2, device=device)
    narrowed = 0
    for seat in range(game.players):
        server = InferenceServer(net, device)
        bayes = BayesBelief(game, server.qnet(), seat, samples=400, mix=0.0, shrink=0.0)
        exact = ExactRange(game, server.qnet(), seat)
        for s in (bayes, exact):
            s.reset(turns[0].state)
        for t, turn in enumerate(turns):
            for s in (bayes, exact):
                s.update(turn.state, turn.move, turn.next_state)
            live = ~turn.next_state.done.cpu()
            want = range_marginals(exact, n, game)[live]
            got = bayes.marginals("v2").cpu()[live]
            assert torch.allclose(got, want, atol=1e-9), f"seat {seat} after move {t}"
            narrowed += int(((bayes.marginals("v0").cpu()[live] - want).abs() > 1e-6).any(-1).any(-1).sum())
    assert narrowed > 0, "no partner move ever narrowed the belief: the test would not see the update"


@pytest.mark.parametrize("device", DEVICES)
def test_the_true_card_keeps_probability_and_the_update_sharpens_the_belief(device: str) -> None:
    """Two cards in hand (the factorisation approximate): in every state of 12 games, for every seat, each
    held true card has positive probability under V0, V1 and V2; and the Bayesian belief puts more mass on
    the true cards than the grounded V0 does, on average."""
    game, n = TWO_CARDS, 12
    net = blueprint(game, device, seed=7)  # a random net whose moves depend on the cards it sees
    turns = turns_of(game, net, n, seed=4, device=device)
    gain, states = 0.0, 0
    for seat in range(game.players):
        bayes = BayesBelief(game, InferenceServer(net, device).qnet(), seat, samples=300)
        bayes.reset(turns[0].state)
        for turn in turns:
            bayes.update(turn.state, turn.move, turn.next_state)
            true = turn.next_state.hands[:, seat].long()  # the test reads the true hand, the belief never
            held = (true >= 0) & ~turn.next_state.done[:, None]
            at = {k: bayes.marginals(k).gather(2, true.clamp(min=0)[..., None]).squeeze(2) for k in
                  ("v0", "v1", "v2")}
            for k, p in at.items():
                assert bool((p[held] > 0).all()), f"{k} gave a true card zero probability"
            gain += float((at["v2"][held].log() - at["v0"][held].log()).sum())
            states += int(held.sum())
    assert states > 100 and gain / states > 0.05, gain / states


def scrambled(state, seat: int, gen: torch.Generator):
    """The state with the searcher's held cards and the undealt deck replaced by random card ids: what the
    searcher does not observe, changed (its knowledge, the public cards and the partners' hands kept)."""
    t = state.hands.max().item() + 1
    hands, deck = state.hands.clone(), state.deck.clone()
    mine = hands[:, seat]
    hands[:, seat] = torch.where(mine >= 0, torch.randint(0, t, mine.shape, generator=gen), mine)
    undealt = torch.arange(deck.shape[1])[None, :] >= state.deck_pos[:, None]
    deck = torch.where(undealt, torch.randint(0, t, deck.shape, generator=gen), deck)
    return state.replace(hands=hands, deck=deck)


def test_the_belief_reads_only_what_the_searcher_observes() -> None:
    """Following 8 recorded games move by move, a belief fed states whose searcher's cards and undealt deck
    are scrambled (everything it does not observe) holds the same marginals and draws the same hands."""
    game, n, seat = TWO_CARDS, 8, 1
    net = blueprint(game, seed=7)
    turns = turns_of(game, net, n, seed=6)
    gen = torch.Generator().manual_seed(0)
    server = InferenceServer(net)
    real, blind = (BayesBelief(game, server.qnet(), seat, samples=200) for _ in range(2))
    real.reset(turns[0].state)
    blind.reset(scrambled(turns[0].state, seat, gen))
    changed = 0
    for turn in turns:
        before, after = scrambled(turn.state, seat, gen), scrambled(turn.next_state, seat, gen)
        changed += int((before.hands[:, seat] != turn.state.hands[:, seat]).any(1).sum())
        real.update(turn.state, turn.move, turn.next_state)
        blind.update(before, turn.move, after)
        assert torch.equal(real.marginals(), blind.marginals())
        games, keys = torch.arange(n), torch.arange(n) + 7
        a, b = real.sample(8, keys, games), blind.sample(8, keys, games)
        assert torch.equal(a.hands, b.hands) and torch.equal(a.valid, b.valid)
    assert changed > 20


def test_lbs_draws_from_the_bayesian_belief() -> None:
    """LBS with --belief-type bayes plays whole games with no belief checkpoint: no decision falls back for
    want of hands, and the same seeds give the same games."""
    game = TWO_CARDS
    net = blueprint(game, seed=7)
    cfg = SearchConfig(rollouts=120, min_rollouts=10, delta=0.0, belief_type="bayes", knowledge="none")
    with SearchSetup.of(game, net, "lbs-inf", cfg) as setup, torch.no_grad():
        assert isinstance(setup.sampler(), BayesBelief) and setup.belief_shown == "bayes"
        first = play_games(setup, games=6, seed=1)
        again = play_games(setup, games=6, seed=1)
    assert [r.decisions for r in first] == [r.decisions for r in again]
    assert sum(r.fallbacks for r in first) == 0 and sum(r.searched for r in first) > 0


def test_the_bayesian_belief_is_refused_in_one_line_where_it_cannot_run() -> None:
    """A bad belief_type, and the Bayesian belief on a blueprint without the networks' split (SmartBot)."""
    with pytest.raises(ValueError, match="belief_type") as err:
        SearchConfig(belief_type="bad")
    game = GameConfig(players=2, colors=3, ranks=3, hand_size=3)
    with pytest.raises(ValueError, match="public/private split") as err2:
        SearchSetup.of(game, SmartBot(game), "lbs-inf", SearchConfig(rollouts=1000, min_rollouts=10,
                                                                     belief_type="bayes"))
    assert "\n" not in str(err.value) + str(err2.value)
