"""Acting rules: the waiting seats' no-op, the engine move of the seat to move, greedy tie-breaking."""

from __future__ import annotations

import pytest
import torch
from conftest import CONFIGS, random_rollout

from lbs.acting import acting_mask, env_moves, greedy, noop_action, play
from lbs.hanabi import legal_moves


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_legal_with_noop(name: str) -> None:
    game = CONFIGS[name]
    a = game.num_actions
    assert a == game.num_moves + 1 and noop_action(game) == game.num_moves
    saw_done = False
    for state, _, _, legal in random_rollout(game, 16, 70, observe=False):
        assert legal.shape == (16, game.players, a) and legal.dtype == torch.bool
        acting = acting_mask(game, state)
        assert torch.equal(acting.sum(1), (~state.done).long())
        assert legal.any(-1).all(), "every seat always has a legal action"
        assert torch.equal(legal[..., -1], ~acting)  # no-op exactly for seats not to move
        mover = legal[torch.arange(16), state.cur_player, :-1]
        assert torch.equal(mover, legal_moves(game, state))
        assert not legal[..., :-1][~acting].any()
        saw_done |= bool(state.done.any())
        # env_moves picks the mover's action and never hands the no-op to the engine
        acts = torch.where(acting, legal[..., :-1].float().argmax(-1), noop_action(game))
        moves = env_moves(game, state, acts)
        assert torch.equal(moves[~state.done], acts[torch.arange(16), state.cur_player][~state.done])
        assert (moves < game.num_moves).all()
    assert saw_done


def test_greedy_against_loop() -> None:
    g = torch.Generator().manual_seed(1)
    q = torch.randint(-3, 4, (300, 9), generator=g).float()  # many ties on purpose
    legal = torch.rand(300, 9, generator=g) < 0.4
    legal[:5] = False  # rows with nothing legal
    got = greedy(q, legal)
    for i in range(300):
        ids = [j for j in range(9) if legal[i, j]]
        if not ids:
            assert got[i] == 0
            continue
        m = max(q[i, j] for j in ids)
        assert got[i] == min(j for j in ids if q[i, j] == m)
    # illegal actions are never chosen even when their Q is the largest
    q2 = torch.zeros(4, 6)
    q2[:, 0] = 100.0
    legal2 = torch.ones(4, 6, dtype=torch.bool)
    legal2[:, 0] = False
    assert torch.equal(greedy(q2, legal2), torch.ones(4, dtype=torch.long))
    assert greedy(q.view(3, 100, 9), legal.view(3, 100, 9)).shape == (3, 100)


def test_play_with_a_move_override_and_a_hook_that_ends_the_loop() -> None:
    """The override's moves are the moves made (a random legal one here, against a greedy blueprint), the
    hook sees them, and a hook that returns True ends the loop there; an override cannot be captured."""
    from lbs.graphs import Graphs
    from lbs.hanabi import GameConfig, engine, random_moves
    from lbs.models import NetConfig, make_qnet
    from lbs.seeding import Stream, game_seeds

    game = GameConfig(players=2, colors=2, ranks=3, hand_size=3)
    torch.manual_seed(0)
    net = make_qnet(game, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1)).eval()
    state = engine.reset(game, game_seeds(Stream.EVAL, 0, 6))
    seen, overridden = [], []

    def override(t, st, hid, move):
        assert hid[0].shape[1] == 6 * game.players  # every seat's state after reading this observation
        mine = random_moves(game, st, torch.arange(6) + 100 * t)
        overridden.append(torch.where(st.done, move, mine))
        return overridden[-1]

    def hook(turn):
        seen.append(turn.move)
        return bool(turn.next_state.done.all())

    with torch.no_grad():
        final, _ = play(game, state, net.step, net.initial_state(6 * game.players), game.max_steps,
                        hook=hook, override=override)
    assert all(torch.equal(a, b) for a, b in zip(seen, overridden, strict=True))
    assert bool(final.done.all()) and len(seen) < game.max_steps  # ended by the hook, not the step count
    replayed = state
    for move in overridden:
        replayed = engine.step(game, replayed, move)[0]
    assert replayed.equal(final)  # the override's moves, and only they, were made
    assert not torch.equal(torch.stack(seen[:5]), torch.stack([t.move for t in _moves(game, net, state)][:5]))
    with pytest.raises(ValueError, match="captured"):
        play(game, state, net.step, net.initial_state(6 * game.players), 1, graphs=Graphs("cpu"),
             override=override)


def _moves(game, net, state):
    """The blueprint's own turns from `state` (no override)."""
    turns = []
    with torch.no_grad():
        play(game, state, net.step, net.initial_state(state.batch_size * game.players), game.max_steps,
             hook=turns.append)
    return turns


def test_a_state_policy_plays_the_moves_of_its_step_and_leaves_the_views_out() -> None:
    """A blueprint that reads the engine state (StatePolicy) makes the moves its step makes on the encoded
    views, through the same loop and hook; its turns carry no views; exploring or colour-shuffled play,
    which need the views, are refused in one line."""
    from lbs.acting import Exploration, StatePolicy, playout_policy
    from lbs.bots import SmartBot
    from lbs.hanabi import GameConfig, engine

    game = GameConfig(players=3)
    bot, n = SmartBot(game), 40
    state = engine.reset(game, torch.arange(n))
    runs = []  # through every seat's encoded view, then reading the state
    for policy in (bot.step, playout_policy(bot, bot.step)):
        turns = []
        final, _ = play(game, state, policy, bot.initial_state(n * 3), game.max_steps, hook=turns.append)
        runs.append((torch.stack([t.move for t in turns]), final))
    (moves, final), (state_moves, state_final) = runs
    assert isinstance(playout_policy(bot, bot.step), StatePolicy)
    assert torch.equal(moves, state_moves) and final.equal(state_final) and bool(final.done.all())
    assert turns[0].obs is None and turns[0].q is None
    explore = Exploration(torch.ones(n), torch.arange(n), 0)
    for bad in (dict(explore=explore), dict(perms=torch.arange(game.colors).repeat(n, 3, 1))):
        with pytest.raises(ValueError, match="StatePolicy"):
            play(game, state, StatePolicy(bot.act), bot.initial_state(n * 3), 1, **bad)
