"""SmartBot against the reference bot's own games, and as a blueprint of the lockstep loop.

tests/fixtures/smartbot/ holds games the reference C++ SmartBot played (deck + moves, see its README). Each
file is replayed in one batch through `lbs.acting.play`: every move the batched bot makes must be the
recorded one, and every final score the recorded score.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch
from conftest import DEVICES

from lbs.acting import StatePolicy, greedy, legal_with_noop, play
from lbs.bots import SmartBot
from lbs.bots import smartbot as sb
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.config import DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK
from lbs.hanabi.encode import encode

FIXTURES = Path(__file__).parents[1] / "fixtures" / "smartbot"

pytestmark = pytest.mark.usefixtures("one_thread")


def load_games(players: int) -> list[dict]:
    with gzip.open(FIXTURES / f"smartbot_{players}p.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def play_decks(game: GameConfig, decks: torch.Tensor, steps: int,
               reads_state: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """SmartBot in every seat from the given decks: (moves [N, steps], -1 once a game is over; scores).
    reads_state: the bot reads the engine state (act) instead of every seat's observation (step)."""
    bot = SmartBot(game)
    state = engine.initial_state(game, decks)
    moves = torch.full((decks.shape[0], steps), -1, dtype=torch.long, device=decks.device)

    def record(turn) -> None:
        moves[:, turn.t] = torch.where(turn.state.done, -1, turn.move)

    hid = bot.initial_state(decks.shape[0] * game.players, device=decks.device)
    state, _ = play(game, state, StatePolicy(bot.act) if reads_state else bot.step, hid, steps, hook=record)
    return moves, state.score


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reads_state", [False, True, "one copy"], ids=["observations", "state", "one_copy"])
@pytest.mark.parametrize("players", [2, 3, 4, 5])
def test_every_reference_move_in_every_fixture_game(players, reads_state, device, monkeypatch):
    if reads_state == "one copy":  # act's one copy of the knowledge per game (CPU), whatever the batch size
        monkeypatch.setattr(sb, "ONE_COPY_FROM", 1)
    games = load_games(players)
    assert games and all(g["players"] == players for g in games)
    game = GameConfig(players=players)
    steps = max(len(g["moves"]) for g in games)
    recorded = torch.full((len(games), steps), -1, dtype=torch.long)
    for i, g in enumerate(games):
        recorded[i, : len(g["moves"])] = torch.tensor(g["moves"])
    decks = torch.tensor([g["deck"] for g in games], device=device)
    moves, scores = play_decks(game, decks, steps, reads_state)
    moves, scores = moves.cpu(), scores.cpu()
    differs = (moves != recorded).any(1)
    first = [(i, int((moves[i] != recorded[i]).nonzero()[0])) for i in differs.nonzero().flatten().tolist()]
    detail = [f"game {i} (seed {games[i]['seed']}) step {t}: played {game.move_name(int(moves[i, t]))}, "
              f"reference {game.move_name(int(recorded[i, t]))}" for i, t in first[:5]]
    assert not first, f"{len(first)} of {len(games)} games leave the reference's moves:\n" + "\n".join(detail)
    assert scores.tolist() == [g["score"] for g in games]


def test_compiled_bot_makes_every_reference_move(monkeypatch, recwarn):
    """Outside the tests SmartBot's observe and decide run compiled on the CPU: compiled, it makes every move
    of the 2-player fixture games, as eagerly. Where this machine cannot compile (no C++ compiler), the bot
    says so in one warning and runs eagerly, and must still make every move."""
    from torch._dynamo.utils import counters

    monkeypatch.delenv(sb.EAGER_VARIABLE)
    games = load_games(2)
    game = GameConfig(players=2)
    steps = max(len(g["moves"]) for g in games)
    recorded = torch.full((len(games), steps), -1, dtype=torch.long)
    for i, g in enumerate(games):
        recorded[i, : len(g["moves"])] = torch.tensor(g["moves"])
    graphs = counters["stats"]["unique_graphs"]
    moves, scores = play_decks(game, torch.tensor([g["deck"] for g in games]), steps)
    fell_back = [w for w in recwarn if "runs eagerly" in str(w.message)]
    assert fell_back or counters["stats"]["unique_graphs"] > graphs  # compiled here, or said why not
    assert torch.equal(moves, recorded) and scores.tolist() == [g["score"] for g in games]


@pytest.mark.parametrize("variant", [dict(players=2), dict(players=3), dict(players=5),
                                     dict(players=2, colors=3), dict(players=3, ranks=3, hand_size=3),
                                     dict(players=4, max_info_tokens=4, max_life_tokens=1)])
def test_reading_the_state_is_decoding_every_observation(variant):
    """read_state holds exactly what each seat's observation shows (its own cards hidden), at every step of
    whole games; act keeps the state step keeps and makes the move step makes."""
    game = GameConfig(**variant)
    bot, n, p = SmartBot(game), 96, game.players
    kinds: set[int] = set()

    def compare(turn) -> None:
        obs = turn.obs.reshape(n * p, -1).float()
        decoded, read = sb.decode(game, obs), sb.read_state(game, turn.state)
        for name in sb._Obs._fields:
            assert torch.equal(getattr(decoded, name), getattr(read, name)), (turn.t, name)
        before = hids[-1]
        move, after = bot.act(turn.state, before)
        _, stepped = bot.step(obs, obs, turn.legal.reshape(n * p, -1), before)
        assert all(torch.equal(a, b) for a, b in zip(after, stepped, strict=True)), turn.t
        assert torch.equal(move, turn.move), turn.t
        hids.append(stepped)
        kinds.update(read.kind.tolist())

    hids = [bot.initial_state(n * p)]
    state, _ = play(game, engine.reset(game, torch.arange(n)), bot.step, hids[0], game.max_steps,
                    hook=compare)
    assert bool(state.done.all()) and kinds == {-1, PLAY, DISCARD, REVEAL_COLOR, REVEAL_RANK}  # all read


@pytest.mark.parametrize("players", [2, 3, 4, 5])
def test_one_copy_per_game_is_every_seat_updating_its_own(players):
    """act on the CPU updates one copy of the knowledge per game and turns it to every seat; it equals every
    seat updating its own copy (moves and every field of every seat's state), also off SmartBot's own play:
    moves of a search's kind (random legal moves, and discards of cards known to be playable, which part the
    seats' copies where no partner or several hold the card newest), so the games whose copies differ are
    read seat by seat, and some do."""
    game, n, p = GameConfig(players=players), 128, players
    bot = SmartBot(game)
    state, hid = engine.reset(game, torch.arange(n) + 7), bot.initial_state(n * p)
    seeds, parted = torch.arange(n) * 31 + 5, 0
    rows = torch.arange(n) * p
    for _ in range(game.max_steps):
        move, after = bot._act_one_copy(state, hid)
        want, every = bot._act_every_seat(state, hid)
        assert torch.equal(move, want) and all(torch.equal(a, b) for a, b in zip(after, every, strict=True))
        seats = every.possible.reshape(n, p, p, -1)  # [N, seat, player, H]
        absolute = torch.stack([seats[:, s].roll(s, dims=1) for s in range(p)], 1)
        parted += int((absolute != absolute[:, :1]).flatten(1).any(1).sum())
        # off the bot's play: a known playable card of the mover's discarded, or a random legal move
        mine = every.possible.index_select(0, rows + state.cur_player)[:, 0]  # [N, H]
        known, _ = sb.known_card(mine)
        sure = known & sb.all_in(mine, every.playable.index_select(0, rows)[:, None]) & (mine != 0)
        legal = engine.legal_moves(game, state)
        slot = sure.long().argmax(1)
        discard = slot  # move ids: discards (by slot) first
        can = sure.any(1) & legal.gather(1, discard[:, None]).squeeze(1)
        coin = torch.rand(n, generator=torch.Generator().manual_seed(int(state.num_steps.max())))
        move = torch.where(can & (coin < 0.5), discard, move)
        move = torch.where(coin > 0.8, engine.random_moves(game, state, seeds, legal), move)
        state, _, _ = engine.step(game, state, torch.where(state.done, 0, move))
        hid = every
        if bool(state.done.all()):
            break
    assert bool(state.done.all()) and parted > 0


def test_scores_mark_the_move_and_idle_seats_pass():
    """Scores are 1 on the move (legal for the seat to move); seats not to move get the no-op."""
    game = GameConfig(players=3)
    bot = SmartBot(game)
    state = engine.reset(game, torch.arange(64))
    hid = bot.initial_state(64 * 3)
    for _ in range(20):
        obs = encode(game, state).reshape(64 * 3, -1)
        legal = legal_with_noop(game, state).reshape(64 * 3, -1)
        scores, hid = bot.step(obs, obs, legal, hid)
        assert set(scores.unique().tolist()) <= {0.0, 1.0} and (scores.sum(1) == 1).all()
        act = greedy(scores, legal).reshape(64, 3)
        mover = act.gather(1, state.cur_player[:, None]).squeeze(1)
        assert bool(legal.reshape(64, 3, -1)[torch.arange(64), state.cur_player, mover].all())
        assert bool((scores.reshape(64, 3, -1)[torch.arange(64), state.cur_player, mover] == 1).all())
        state, _, _ = engine.step(game, state, torch.where(state.done, 0, mover))


def test_every_seat_holds_the_same_public_knowledge():
    """The knowledge is built from public events alone, so every seat's copy is the same (seen from its own
    seat): seat s's player q is seat 0's player (s + q) mod P, at every step of real games."""
    for players in (2, 4):
        game = GameConfig(players=players)
        games = load_games(players)[:200]
        n = len(games)
        state = engine.initial_state(game, torch.tensor([g["deck"] for g in games]))
        bot = SmartBot(game)
        hid = bot.initial_state(n * players)
        for _ in range(game.max_steps):
            state, hid = play(game, state, bot.step, hid, 1)
            seats = hid.possible.reshape(n, players, players, game.hand_size)  # [N, seat, player, H]
            for s in range(1, players):
                assert torch.equal(seats[:, s], seats[:, 0].roll(-s, dims=1))
            if bool(state.done.all()):
                break
        assert bool(state.done.all())


@pytest.mark.parametrize("players", [2, 3])
def test_own_knowledge_allows_every_true_card_and_follows_one_seat(players):
    """own_cards allows the card every seat really holds, in every held slot at every step of fixture games
    (the conventions hold when every seat is SmartBot), and none in an empty slot; a state that follows one
    seat through observe (as a hand sampler does) equals that seat's rows of the lockstep states."""
    game = GameConfig(players=players)
    games = load_games(players)[:200]
    n, seat = len(games), players - 1
    state = engine.initial_state(game, torch.tensor([g["deck"] for g in games]))
    bot = SmartBot(game)
    hid, one = bot.initial_state(n * players), bot.initial_state(n, seat=seat)
    checked = 0
    for _ in range(game.max_steps):
        one = bot.observe(encode(game, state)[:, seat], one)
        before = state
        state, hid = play(game, state, bot.step, hid, 1)
        for mine, all_rows in zip(one, hid, strict=True):
            assert torch.equal(mine, all_rows[seat::players])
        own = bot.own_cards(hid).reshape(n, players, game.hand_size, game.card_types)
        hands = before.hands
        live = (~before.done)[:, None, None] & (hands >= 0)
        allows = own.gather(3, hands.clamp(min=0)[..., None]).squeeze(3)
        assert bool(allows[live].all()) and not bool(own[(hands < 0)[..., None].expand_as(own)].any())
        checked += int(live.sum())
        if bool(state.done.all()):
            break
    assert checked > 200 * game.hand_size * players * 40


def test_settle_stops_early_only_where_nothing_changes(monkeypatch):
    """The CPU stops the settling rounds at the fixed point, and takes only the rows where a card became
    known; running every round on every row (as on an accelerator) gives the same knowledge at every step of
    real games, with rounds after the first needed there, and the same games."""
    game = GameConfig(players=3)
    games = load_games(3)[:100]
    decks = torch.tensor([g["deck"] for g in games])
    steps = max(len(g["moves"]) for g in games)
    settled = []

    def both(*args):
        fast = real(*args)
        with monkeypatch.context() as m:
            m.setattr(sb, "_stop_at_fixed_point", lambda device: False)
            full = real(*args)
        tb = sb.tables(game, fast.device)
        one = sb._settle_round(game, tb, *args[1:])
        settled.append(not torch.equal(one, sb._settle_round(game, tb, one, *args[2:])))
        assert torch.equal(fast, full)
        return fast

    real = sb.settle
    monkeypatch.setattr(sb, "settle", both)
    fast, fast_scores = play_decks(game, decks, steps)
    assert len(settled) >= 50 and any(settled)
    monkeypatch.setattr(sb, "settle", real)
    monkeypatch.setattr(sb, "_stop_at_fixed_point", lambda device: False)
    full, full_scores = play_decks(game, decks, steps)
    assert torch.equal(fast, full) and torch.equal(fast_scores, full_scores)


@pytest.mark.parametrize("bad", [dict(max_life_tokens=4)])
def test_unsupported_configs_are_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match="max_life_tokens"):
        SmartBot(GameConfig(**bad))


@pytest.mark.parametrize("variant", [dict(players=2, colors=3), dict(players=3, ranks=3, hand_size=3),
                                     dict(players=4, max_info_tokens=4, max_life_tokens=1)])
def test_variants_play_legal_games(variant):
    """Small decks, other hand sizes, fewer tokens: every move legal, every game over in time."""
    game = GameConfig(**variant)
    bot = SmartBot(game)
    state = engine.reset(game, torch.arange(200))

    def legal(turn) -> None:
        ok = engine.legal_moves(game, turn.state).gather(1, turn.move[:, None]).squeeze(1)
        assert bool((ok | turn.state.done).all())

    state, _ = play(game, state, bot.step, bot.initial_state(200 * game.players), game.max_steps, hook=legal)
    assert bool(state.done.all()) and float(state.score.float().mean()) > 0
