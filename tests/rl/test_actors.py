"""Self-play rounds: recorded episodes agree with the engine; colour shuffle and aux targets agree."""

import torch

from lbs.acting import noop_action
from lbs.hanabi import GameConfig, engine, initial_state
from lbs.hanabi.encode import encode
from lbs.models import FixedQNet, NetConfig, make_qnet
from lbs.models.qnet import AUX_EMPTY, AUX_OTHER, AUX_PLAYABLE, AUX_PLAYED
from lbs.rl.actors import ActorConfig, aux_targets, run_round

GAME = GameConfig(players=2, colors=2, ranks=3, hand_size=3)


def _net_fns(net):
    return net.step, lambda b: net.initial_state(b, "cpu")


def test_round_records_the_games_it_plays():
    net = make_qnet(GAME, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1))
    seeds = torch.arange(6)
    cfg = ActorConfig(num_games=6, max_len=GAME.max_steps)
    with torch.no_grad():
        ep, stats = run_round(GAME, *_net_fns(net), seeds, 3, cfg, eps=torch.full((6,), 0.5), aux=True)
    # Replaying the recorded moves in the engine gives the same observations, rewards and scores.
    state = engine.reset(GAME, seeds, torch.full_like(seeds, 3))
    noop = noop_action(GAME)
    for t in range(cfg.max_len):
        m = ep["mask"][:, t]
        assert torch.equal(m, ~state.done)
        assert torch.equal(ep["priv"][:, t][m], encode(GAME, state, dtype=torch.uint8)[m])
        acting = ep["action"][:, t].gather(1, state.cur_player[:, None]).squeeze(1)
        others = ep["action"][:, t].scatter(1, state.cur_player[:, None], noop)
        assert (others[m] == noop).all() and (acting[m] < noop).all()
        assert ep["legal"][:, t].gather(2, ep["action"][:, t, :, None]).all()
        state, r, _ = engine.step(GAME, state, torch.where(m, acting, 0), checked=True)
        assert torch.equal(ep["reward"][:, t], r * m)
    assert torch.equal(stats["score"], state.score)
    assert torch.equal(ep["reward"].sum(1), state.score.float())
    assert ep["aux_target"][ep["mask"]].ge(0).any() and (ep["aux_target"] <= 2).all()


def test_colour_shuffle_is_a_consistent_relabelling():
    """A colour-blind policy (FixedQNet ignores its input except legality) plays the same game with or
    without other-play shuffling when it only ever plays/discards; and recorded legal masks permute."""
    order = list(range(GAME.hand_size, 2 * GAME.hand_size))  # always play slot 0 first
    net = FixedQNet(GAME, order=order)
    seeds = torch.arange(8)
    plain = ActorConfig(num_games=8, max_len=GAME.max_steps)
    shuffled = ActorConfig(num_games=8, max_len=GAME.max_steps, shuffle_colors=True)
    with torch.no_grad():
        a, sa = run_round(GAME, *_net_fns(net), seeds, 0, plain)
        b, sb = run_round(GAME, *_net_fns(net), seeds, 0, shuffled)
    assert torch.equal(sa["score"], sb["score"]) and torch.equal(a["action"], b["action"])
    # Same number of legal colour hints per step (relabelled), different feature bits somewhere.
    assert torch.equal(a["legal"].sum(-1), b["legal"].sum(-1))
    assert not torch.equal(a["priv"], b["priv"])
    # Card counts per rank are invariant under colour renaming.
    ranks = GAME.ranks
    ha, hb = a["own_hand"].long(), b["own_hand"].long()
    assert torch.equal(torch.where(ha >= 0, ha % ranks, -1), torch.where(hb >= 0, hb % ranks, -1))


def _deck(game: GameConfig, first: list[int]) -> torch.Tensor:
    """A legal deck order starting with the given card ids."""
    rest = [c for c, n in enumerate(game.card_counts) for _ in range(n)]
    for c in first:
        rest.remove(c)
    return torch.tensor([first + rest])


def test_aux_targets_hand_built() -> None:
    game = GameConfig(players=2)
    r = game.ranks

    def card(color: int, rank: int) -> int:  # rank 1-based, as printed on the card
        return color * r + rank - 1

    red, yellow, green, blue = 0, 1, 2, 4
    hand0 = [card(red, 3), card(red, 1), card(yellow, 1), card(green, 2), card(blue, 5)]
    hand1 = [card(red, 2), card(yellow, 2), card(green, 1), card(red, 4), card(yellow, 1)]
    state = initial_state(game, _deck(game, hand0 + hand1))
    fireworks = torch.zeros(1, game.colors, dtype=torch.long)
    fireworks[0, red] = 2  # red 1 and 2 played; yellow, green, blue empty
    hands = state.hands.clone()
    hands[0, 1, 4] = -1  # player 1 is down to four cards
    state = state.replace(fireworks=fireworks, hands=hands)
    P, X, O, E = AUX_PLAYABLE, AUX_PLAYED, AUX_OTHER, AUX_EMPTY
    want = torch.tensor([[[P, X, P, O, O], [X, O, P, O, E]]])
    assert torch.equal(aux_targets(game, state), want)
    assert torch.equal(aux_targets(game, state, torch.tensor([[1]])), want[:, 1:])
    assert torch.equal(aux_targets(game, state, torch.tensor([[1, 0]])), want.flip(1))
