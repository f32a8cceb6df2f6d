"""SmartBot (Arthur O'Dwyer's rule-based Hanabi bot), batched: the seats of B games decide at once.

Rules learnt from the reference (SmartBot.cc in Quuxplusone/Hanabi), re-written for tensors. The bot keeps,
for every (player, slot), the set of card identities still possible, as a bit mask (bit t: card id t). That
set is built from public events (hints, plays, discards and the conventions that read them), so it is the
bot's state here, one copy per seat, advanced from each observation's last-action section; what the deciding
seat sees (the other hands) enters only inside a decision, and in one knowledge update: the discard
finesse, which locates the discarded card among the partners' newest cards (`SmartBot.reads_hands` says
where, for search). The conventions:

- a hint marks the newest touched card whose playability it leaves open as playable, unless it showed a
  playable card outright;
- the player after the hinter expects a warning before discarding a valuable card (the last copy of a card
  still needed): a rank hint on the card they would discard next is that warning, and any other move tells
  them that card is not valuable;
- discarding a known playable card that a partner holds as their newest card tells them so (discard finesse);
- with the deck (nearly) empty, play the card most likely to be playable.

The reference caches playable / valuable / worthless per card and refreshes the caches lazily; every cached
value it reads equals the value computed from the current identity set and board, so they are recomputed
here. The reference reads each move before it takes effect (tokens, fireworks, deck as they were), so the
state keeps the board it last saw.

On the CPU the two costliest pieces, reading a move into the knowledge (`observe`) and deciding (`decide`),
run compiled by torch.compile (each a few hundred small element-wise operations that Inductor fuses into a
few loops; compiled once per process and game shape: half a minute the first time on a machine, seconds
once Inductor's cache holds it); `LBS_EAGER=1` in the environment runs them eagerly.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import torch

from ..blueprint import Capabilities, RuleBot
from ..hanabi.config import DISCARD, LAST_ACTION_TYPE_ORDER, PLAY, REVEAL_COLOR, REVEAL_RANK, GameConfig
from ..hanabi.engine import Tables, device_tables, tables
from ..hanabi.state import HanabiState

MAX_LIVES = 3
"""The reference's end-game table (when to play a card it only hopes is playable) is written for 3 lives."""


ONE_COPY_FROM = 2048
"""Games at once from which SmartBot.act updates one copy of the knowledge per game on the CPU: it halves
the update's work at 2 players but adds some twenty small operations, whose fixed cost outweighs that below
a few thousand games (experiments.bench_smartbot speed: slower at 256 and 1,024 games, faster at 4,096)."""


class SmartBotState(NamedTuple):
    """One seat's copy of the public card knowledge, and the board it last saw (the next move is read
    against the board as it was before that move)."""

    possible: torch.Tensor  # [R, P, H] int32 bit mask of the identities each card may be, observer first
    seat: torch.Tensor  # [R] long: the observer's absolute seat (a discard finesse scans seats in order)
    playable: torch.Tensor  # [R] int32: the board as last seen (_Board's masks), so it is computed once
    worthless: torch.Tensor  # [R] int32
    valuable: torch.Tensor  # [R] int32
    used: torch.Tensor  # [R] long: cards played or discarded, as last seen
    deck: torch.Tensor  # [R] long: cards left in the deck as last seen; -1 before the first observation
    hints: torch.Tensor  # [R] long: hint tokens as last seen
    batch_dim = 0  # rows first, unlike an LSTM's HiddenState (no annotation: a class constant, not a field)


class _Obs(NamedTuple):
    """What SmartBot reads from a canonical observation [R, D] (players relative to the observer)."""

    hands: torch.Tensor  # [R, P, H] long card ids of the partners' cards (-1: empty, and the observer's own)
    present: torch.Tensor  # [R, P, H] bool: the slot holds a card
    fireworks: torch.Tensor  # [R, C] long
    seen: torch.Tensor  # [R, T] long: played + discarded copies per card id
    deck: torch.Tensor  # [R] long
    hints: torch.Tensor  # [R] long
    lives: torch.Tensor  # [R] long
    actor: torch.Tensor  # [R] long: who made the last move (-1: none)
    kind: torch.Tensor  # [R] long: its type (DISCARD / PLAY / REVEAL_*), -1 none
    target: torch.Tensor  # [R] long: hint target
    color: torch.Tensor  # [R] long: hinted colour
    rank: torch.Tensor  # [R] long: hinted rank
    reveal: torch.Tensor  # [R, H] bool: the target's slots the hint touched
    slot: torch.Tensor  # [R] long: slot played or discarded
    card: torch.Tensor  # [R] long: card played or discarded


class _Board(NamedTuple):
    """Per row, the identities (bit masks [R] int32) that are playable, worthless and valuable now."""

    playable: torch.Tensor
    worthless: torch.Tensor
    valuable: torch.Tensor


class SeatView(NamedTuple):
    """What a seat to move decides from (rows first): its observation's fields, its knowledge after reading
    that observation, and the board now. Search swaps the cards it shows of one partner (moves_seeing)."""

    ob: _Obs
    possible: torch.Tensor  # [R, P, H] int32
    board: _Board


@dataclass(frozen=True)
class _Masks:
    """A game's constant tables: identity bit masks (int32, card ids < 25) per card, colour, rank and hint
    (colours then ranks), and the observation decoder."""

    card: torch.Tensor  # [T] int32: 1 << t
    color: torch.Tensor  # [C] int32
    rank: torch.Tensor  # [K] int32
    hint: torch.Tensor  # [C + K] int32
    full: int
    decoder: tuple[tuple[str, slice, int, torch.Tensor], ...]  # (field, section, groups, weights): _decoder


@device_tables
def _masks(game: GameConfig, device: torch.device) -> _Masks:
    t = game.card_types
    ids = torch.arange(t)
    card = (torch.ones(t, dtype=torch.int32) << ids.int())
    color = torch.stack([card[ids // game.ranks == c].sum() for c in range(game.colors)]).int()
    rank = torch.stack([card[ids % game.ranks == r].sum() for r in range(game.ranks)]).int()
    decoder = tuple((name, sl, groups, w.to(device)) for name, sl, groups, w in _decoder(game))
    return _Masks(card.to(device), color.to(device), rank.to(device), torch.cat([color, rank]).to(device),
                  (1 << t) - 1, decoder)


def check_game(game: GameConfig) -> None:
    """SmartBot's rules generalise to any deck, hand size, player count and hint count; its end-game table
    is written for at most three lives. Bad configs raise ValueError naming the field."""
    if game.max_life_tokens > MAX_LIVES:
        raise ValueError(f"GameConfig.max_life_tokens={game.max_life_tokens}: SmartBot plays with at most "
                         f"{MAX_LIVES} lives")


_F = TypeVar("_F", bound=Callable)


EAGER_VARIABLE = "LBS_EAGER"
"""Set to 1 in the environment, SmartBot never compiles (the tests set it; one checks the compiled path)."""


def eager() -> bool:
    """Whether the environment asks SmartBot to run eagerly: LBS_EAGER=1 yes, unset (or empty) no; any other
    value is refused (ValueError in one line), not silently read as unset."""
    value = os.environ.get(EAGER_VARIABLE, "")
    if value not in ("", "1"):
        raise ValueError(f"{EAGER_VARIABLE}={value!r}: set it to 1 (SmartBot runs eagerly) or leave it unset")
    return value == "1"


def _compiled_on_cpu(fn: _F) -> _F:
    """fn(game, x, ...) compiled by torch.compile where x is a batch of at least two rows on the CPU (one row
    would compile again for its own shape, for no gain); elsewhere, with LBS_EAGER=1, and for good once
    compiling has failed (no C++ compiler, say), fn itself. The same results: integer work, and floats only
    compared."""
    compiled: list[Callable] = []  # made on first use: importing torch.compile's machinery takes a second
    failed: list[BaseException] = []

    @functools.wraps(fn)
    def run(game: GameConfig, x, *args):
        t = x if isinstance(x, torch.Tensor) else x.possible
        if (failed or t.device.type != "cpu" or t.shape[0] < 2 or torch.compiler.is_compiling()
                or eager()):
            return fn(game, x, *args)
        try:
            if not compiled:
                compiled.append(torch.compile(fn, dynamic=True))
            return compiled[0](game, x, *args)
        except Exception as e:  # noqa: BLE001  (fn itself runs next: a bug in it raises there)
            failed.append(e)
            warnings.warn(f"SmartBot runs eagerly: torch.compile failed ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''})", RuntimeWarning, stacklevel=2)
            return fn(game, x, *args)

    return run  # type: ignore[return-value]


class SmartBot(RuleBot):
    """A blueprint with the networks' interface: `initial_state(rows)` and `step(priv, publ, legal, state)
    -> (scores, state)`, row n * P + p being seat p of game n. Scores are 1 on SmartBot's move and 0
    elsewhere: they mark the move and are no value. A module without weights, so whatever serves, moves or
    copies a network takes it as it is."""

    name = "smartbot"
    capabilities = Capabilities(public_state=True, card_knowledge=True, reads_hands=True, seat_view=True,
                                acts_on_state=True)
    """no value (its scores mark its move); the state is public card knowledge built from public events, but
    for the discard finesse's read of partners' cards (reads_hands)"""

    def __init__(self, game: GameConfig, device: torch.device | str = "cpu"):
        check_game(game)
        super().__init__(game, device)

    def initial_state(self, rows: int, device: torch.device | str | None = None,
                      seat: int | None = None) -> SmartBotState:
        """Row n * P + p is seat p of game n; with `seat`, every row is that seat (one seat followed in
        each of `rows` games, as a hand sampler follows the searcher's)."""
        g = self.game
        dev = torch.device(device) if device is not None else self.device
        z = torch.zeros(rows, dtype=torch.long, device=dev)
        bd = board(g, torch.zeros(rows, g.colors, dtype=torch.long, device=dev),
                   torch.zeros(rows, g.card_types, dtype=torch.long, device=dev))
        return SmartBotState(
            possible=torch.full((rows, g.players, g.hand_size), _masks(g, dev).full, dtype=torch.int32,
                                device=dev),
            seat=torch.arange(rows, device=dev) % g.players if seat is None else z + seat,
            playable=bd.playable, worthless=bd.worthless, valuable=bd.valuable,
            used=z,
            deck=z - 1,
            hints=z,
        )

    def step(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor,
             state: SmartBotState) -> tuple[torch.Tensor, SmartBotState]:
        """Every seat reads the last move into its knowledge; the seat to move in each game chooses.
        Scores [R, A]: 1 on the move (seats not to move: on the no-op, their only legal action)."""
        del publ  # the canonical observation holds everything SmartBot reads
        g = self.game
        ob = decode(g, priv)
        state = self._read(ob, state, board(g, ob.fireworks, ob.seen))
        # one decision per game: the row of its seat to move (the lockstep rows are n * P + p)
        n = priv.shape[0] // g.players
        moving = legal[:, : g.num_moves].any(1).reshape(n, g.players)
        rows = torch.arange(n, device=priv.device) * g.players + moving.long().argmax(1)
        move = self._decide(ob, state, rows)
        scores = torch.zeros(legal.shape, dtype=torch.float32, device=legal.device)
        scores[:, g.num_moves] = 1.0
        scores[rows] = torch.nn.functional.one_hot(move, legal.shape[1]).float()
        return scores, state

    def act(self, state: HanabiState, hid: SmartBotState) -> tuple[torch.Tensor, SmartBotState]:
        """step's moves read off the engine state of N games instead of every seat's observation (read_state
        equals decoding them): (the move [N] of each game's seat to move, 0 in finished games; every seat's
        next `hid`). What a playout that keeps no observation calls (lbs.acting.StatePolicy). On the CPU,
        from ONE_COPY_FROM games at once, one copy of the knowledge per game is updated (_act_one_copy),
        elsewhere every seat's."""
        if _stop_at_fixed_point(state.device) and state.batch_size >= ONE_COPY_FROM:
            return self._act_one_copy(state, hid)
        return self._act_every_seat(state, hid)

    def _act_every_seat(self, state: HanabiState, hid: SmartBotState) -> tuple[torch.Tensor, SmartBotState]:
        """act, each seat's copy of the knowledge updated from its own view."""
        g, n = self.game, state.batch_size
        ob = read_state(g, state)
        bd = board(g, state.fireworks, ob.seen[:: g.players])  # the same for every seat of a game
        hid = self._read(ob, hid, _Board(*(x.repeat_interleave(g.players, 0) for x in bd)))
        move = self._decide(ob, hid, torch.arange(n, device=state.device) * g.players + state.cur_player)
        return torch.where(state.done, 0, move), hid

    def _act_one_copy(self, state: HanabiState, hid: SmartBotState) -> tuple[torch.Tensor, SmartBotState]:
        """act with the knowledge updated once per game, from the view of its seat to move, and handed to
        the other seats turned to their own seat: every seat holds the same copy as long as every update is
        read from public events. One is not: a discard finesse is located in the partners' newest cards,
        which each seat sees differently, so the seats' copies part where no partner or more than one holds
        the card newest (a search's deviation can make that). Games whose copies differ already, or whose
        last move is such a discard, take the every-seat update (a host read, free on the CPU)."""
        g, n, p = self.game, state.batch_size, self.game.players
        dev = state.device
        mover = state.cur_player
        first = torch.arange(n, device=dev) * p
        ob = read_state(g, state, mover)  # [N]: the view of each game's seat to move
        before = _rows_of(hid, first + mover)
        tb = _turns(g, dev)
        absolute = hid.possible.reshape(n, -1).index_select(1, tb.absolute).reshape(n, p, -1)
        parted = (absolute != absolute[:, :1]).flatten(1).any(1) | discard_finesse(g, before, ob)
        one = self._read(ob, before, board(g, state.fireworks, ob.seen))
        # seat s's player q is the mover's player s + q - mover (rows n * P + s are seat s)
        possible = one.possible.reshape(n, -1).gather(1, tb.turned[mover]).reshape(n * p, p, g.hand_size)
        public = (x.repeat_interleave(p, 0) for x in one[2:])
        out = SmartBotState(possible, hid.seat, *public)
        mine = one.possible
        games = parted.nonzero().squeeze(1)
        if games.numel():
            rows = (games[:, None] * p + torch.arange(p, device=dev)).reshape(-1)
            some = state.index(games)
            ob_all = read_state(g, some)
            bd = board(g, some.fireworks, ob_all.seen[::p])
            each = self._read(ob_all, _rows_of(hid, rows), _Board(*(x.repeat_interleave(p, 0) for x in bd)))
            out = SmartBotState(*(x.index_copy(0, rows, y) for x, y in zip(out, each, strict=True)))
            at = torch.arange(games.numel(), device=dev) * p + mover.index_select(0, games)
            mine = mine.index_copy(0, games, each.possible.index_select(0, at))
        move = decide(g, mine, ob, _Board(one.playable, one.worthless, one.valuable))
        return torch.where(state.done, 0, move), out

    def _decide(self, ob: _Obs, state: SmartBotState, rows: torch.Tensor) -> torch.Tensor:
        bd = _Board(state.playable, state.worthless, state.valuable)
        return decide(self.game, state.possible.index_select(0, rows), _rows_of(ob, rows), _rows_of(bd, rows))

    def observe(self, priv: torch.Tensor, state: SmartBotState) -> SmartBotState:
        """The state after reading the observation priv [R, D] (step's, without deciding)."""
        ob = decode(self.game, priv)
        return self._read(ob, state, board(self.game, ob.fireworks, ob.seen))

    def _read(self, ob: _Obs, state: SmartBotState, bd: _Board) -> SmartBotState:
        """The state after reading ob, with bd the board ob shows."""
        possible = advance(self.game, state, ob)
        return SmartBotState(possible, state.seat, *bd, ob.seen.sum(1), ob.deck, ob.hints)

    def own_cards(self, state: SmartBotState) -> torch.Tensor:
        """[R, H, T] bool: the identities each of the row's own cards may be, by the bot's public knowledge
        (hints, counts and the conventions' inferences; none in a slot that holds no card). What a
        learned belief's samples can be restricted to (search.samplers.LearnedBelief)."""
        mk = _masks(self.game, state.possible.device)
        return (state.possible[:, 0, :, None] & mk.card) != 0

    def reads_hands(self, priv: torch.Tensor, state: SmartBotState) -> torch.Tensor:
        """[R] bool: stepping this state on priv reads the partners' cards into its knowledge (a discard
        finesse), so what a row's seat sees of other hands changes its state, not only its move. Search
        asks this to know when the searcher's unseen cards enter the partners' shared state."""
        return discard_finesse(self.game, state, decode(self.game, priv))

    def seat_view(self, priv: torch.Tensor, state: SmartBotState) -> SeatView:
        """What each row's seat to move decides from: its observation priv [R, D] and its state after
        reading it (step's output). Only the cards it sees enter the decision beyond this, so search asks
        moves_seeing for every candidate hand of a partner instead of re-running the step per candidate."""
        bd = _Board(state.playable, state.worthless, state.valuable)
        return SeatView(decode(self.game, priv), state.possible, bd)

    def moves_seeing(self, view: SeatView, partner: torch.Tensor, hands: torch.Tensor) -> torch.Tensor:
        """[n] long: each row's move (view: seat_view's rows) if the player `partner` [n] seats after the
        mover held hands [n, H] (card ids, -1 empty; which slots are held is the view's)."""
        at = (torch.arange(self.game.players, device=hands.device) == partner[:, None])[..., None]
        ob = view.ob._replace(hands=torch.where(at, hands[:, None, :].long(), view.ob.hands))
        return decide(self.game, view.possible, ob, view.board)


def _rows_of(fields: NamedTuple, rows: torch.Tensor) -> NamedTuple:
    """The same named tensors at `rows` (batch first)."""
    return type(fields)(*(x.index_select(0, rows) for x in fields))


# ---- reading observations -------------------------------------------------------------------------------
def _decoder(game: GameConfig) -> tuple[tuple[str, slice, int, torch.Tensor], ...]:
    """Every field SmartBot reads is linear in its own section of the observation's bits: a one-hot's
    index + 1 is its product with 1..W, a thermometer's count its sum, a discard count per card id a sum
    over that id's copies. Returns each field's (name, section, groups, weights [section width / groups,
    width / groups]) (float, CPU): the section is cut into `groups` equal parts, each multiplied by the
    weights. Small products per section take about 2,000 multiply-adds per row, where one matrix over all
    the sections took 16,000."""
    g, lay = game, game.layout
    fields: list[tuple[str, slice, int, torch.Tensor]] = []

    def add(name: str, section: str, weights: torch.Tensor, groups: int = 1) -> None:
        fields.append((name, lay.slices[section], groups, weights))

    def index(width: int) -> torch.Tensor:  # a one-hot's index + 1
        return torch.arange(1.0, width + 1)[:, None]

    def count(width: int) -> torch.Tensor:
        return torch.ones(width, 1)

    h, t = g.hand_size, g.card_types
    add("hands", "hands.cards", index(t), (g.players - 1) * h)
    add("missing", "hands.missing", count(1), g.players)
    add("deck", "board.deck", count(g.max_deck_after_deal))
    add("fireworks", "board.fireworks", index(g.ranks), g.colors)
    add("hints", "board.info", count(g.max_info_tokens))
    add("lives", "board.lives", count(g.max_life_tokens))
    inst = tables(game, torch.device("cpu")).instance_card
    add("discarded", "discards", (inst[:, None] == torch.arange(t)).float())
    add("actor", "last_action.actor", index(g.players))
    add("kind", "last_action.type", torch.tensor(LAST_ACTION_TYPE_ORDER, dtype=torch.float)[:, None] + 1)
    for part in ("target", "color", "rank", "slot", "card"):
        sl = lay.slices[f"last_action.{part}"]
        add(part, f"last_action.{part}", index(sl.stop - sl.start))
    add("reveal", "last_action.reveal", count(1), h)
    return tuple(fields)


def decode(game: GameConfig, obs: torch.Tensor) -> _Obs:
    """The sections of canonical observations [R, D] (float or uint8) SmartBot reads, as indices and counts
    (one small product per section with _decoder's weights, then integer work on the few columns)."""
    g, tb, mk = game, tables(game, obs.device), _masks(game, obs.device)
    n, p, h = obs.shape[0], g.players, g.hand_size
    f = {name: (obs[:, sl].to(w.dtype).reshape(n * groups, -1) @ w).reshape(n, -1).long()
         for name, sl, groups, w in mk.decoder}
    hands = torch.cat([torch.zeros(n, 1, h, dtype=torch.long, device=obs.device),
                       f["hands"].reshape(n, p - 1, h)], 1) - 1
    played = tb.card_rank[None, :] < _per_card(g, f["fireworks"])
    return _Obs(
        hands=hands,
        present=torch.arange(h, device=obs.device) < h - f["missing"][..., None],
        fireworks=f["fireworks"],
        seen=f["discarded"] + played.long(),
        deck=f["deck"][:, 0],
        hints=f["hints"][:, 0],
        lives=f["lives"][:, 0],
        actor=f["actor"][:, 0] - 1,
        kind=f["kind"][:, 0] - 1,
        target=f["target"][:, 0] - 1,
        color=f["color"][:, 0] - 1,
        rank=f["rank"][:, 0] - 1,
        reveal=f["reveal"] != 0,
        slot=f["slot"][:, 0] - 1,
        card=f["card"][:, 0] - 1,
    )


def read_state(game: GameConfig, state: HanabiState, observers: torch.Tensor | None = None) -> _Obs:
    """decode(encode(state)) for every seat of N games (rows n * P + p: seat p of game n), read off the engine
    state: the partners' cards, which slots hold a card, the board and the last move, the seat's own cards
    left out as its observation leaves them out (a test holds the two equal on every state of many games).
    With observers [N], one row per game: that seat's."""
    g, tb, dev = game, tables(game, state.device), state.device
    n, p, h = state.batch_size, game.players, game.hand_size
    seats = torch.arange(p, device=dev)
    missing = (state.hands < 0).any(2, keepdim=True).long()  # [N, P, 1]: one bit per player
    if observers is None:
        hands = _rotated(state.hands)  # [N, P, P, H]: observer o's player q is player o + q
        missing = _rotated(missing)
    else:  # [N, 1, P, ...]: each game's one observer
        at = (observers[:, None] + seats) % p  # [N, P]: the observer's player q is player o + q
        hands = state.hands.gather(1, at[..., None].expand(n, p, h))[:, None]
        missing = missing.gather(1, at[..., None])[:, None]
        seats = observers[:, None]
    own = torch.arange(p, device=dev)[:, None] == 0
    hands = torch.where(own, -1, hands)  # the observer's own cards hidden
    rows = hands.shape[0] * hands.shape[1]
    played = tb.card_rank[None, :] < _per_card(g, state.fireworks)
    moved = state.last_player >= 0
    m = state.last_move.clamp(min=0)
    kind = torch.where(moved, tb.move_type[m], -1)
    is_color, is_rank = kind == REVEAL_COLOR, kind == REVEAL_RANK
    is_card = (kind == PLAY) | (kind == DISCARD)
    actor = torch.where(moved[:, None], (state.last_player[:, None] - seats) % p, -1)  # [N, P or 1]
    target = torch.where((is_color | is_rank)[:, None], (actor + tb.move_offset[m][:, None]) % p, -1)
    copies = p if observers is None else 1

    def each(x: torch.Tensor) -> torch.Tensor:  # the same for every seat of a game
        return x.repeat_interleave(copies, 0) if copies > 1 else x

    return _Obs(
        hands=hands.reshape(rows, p, h),
        present=torch.arange(h, device=dev) < h - missing.reshape(rows, p, 1),
        fireworks=each(state.fireworks),
        seen=each(state.discards + played.long()),
        deck=each(g.num_cards - state.deck_pos),
        hints=each(state.info_tokens),
        lives=each(state.life_tokens),
        actor=actor.reshape(-1),
        kind=each(kind),
        target=target.reshape(-1),
        color=each(torch.where(is_color, tb.move_color[m], -1)),
        rank=each(torch.where(is_rank, tb.move_rank[m], -1)),
        reveal=each(state.last_reveal & (is_color | is_rank)[:, None]),
        slot=each(torch.where(is_card, m % h, -1)),
        card=each(torch.where(is_card, state.last_card, -1)),
    )


def _per_card(game: GameConfig, fireworks: torch.Tensor) -> torch.Tensor:
    """fireworks [R, C] -> [R, T]: each card id's colour's firework (ids are colour * ranks + rank; a copy
    of each colour R times, where indexing by the id's colour takes several times longer on the CPU)."""
    return fireworks[:, :, None].expand(-1, -1, game.ranks).reshape(fireworks.shape[0], game.card_types)


def _rotated(x: torch.Tensor) -> torch.Tensor:
    """x [N, P, F] per absolute player -> [N, P, P, F]: row o holds players o, o + 1, ... (mod P), one copy
    (a strided view of x twice over, as the encoder's rotations)."""
    n, p, f = x.shape
    twice = torch.cat([x, x], 1)
    return twice.as_strided((n, p, p, f), (2 * p * f, f, f, 1))


class _Turns(NamedTuple):
    """Index tables that turn a game's copies of the knowledge between seats (flattened [P, H] per seat)."""

    absolute: torch.Tensor  # [P * P * H]: the P seats' copies [P, P, H] -> each by absolute player
    turned: torch.Tensor  # [P, P * P * H]: by the mover: the mover's copy [P * H] -> every seat's [P, P, H]


@device_tables
def _turns(game: GameConfig, device: torch.device) -> _Turns:
    p, h = game.players, game.hand_size
    s, a, k = torch.meshgrid(torch.arange(p), torch.arange(p), torch.arange(h), indexing="ij")
    absolute = s * p * h + (a - s) % p * h + k  # seat s's copy holds absolute player a at a - s
    turned = torch.stack([(s + a - m) % p * h + k for m in range(p)])  # seat s's player a: mover's s + a - m
    return _Turns(absolute.reshape(-1).to(device), turned.reshape(p, -1).to(device))


def _to_mask(game: GameConfig, x: torch.Tensor) -> torch.Tensor:
    """bool [..., T] -> int32 bit mask [...]."""
    return (x.to(torch.int32) * _masks(game, x.device).card).sum(-1, dtype=torch.int32)


def board(game: GameConfig, fireworks: torch.Tensor, seen: torch.Tensor) -> _Board:
    """Playable, worthless (below its firework, or above a rank whose copies are all gone) and valuable (the
    last copy of a card still needed) identities, from fireworks [R, C] and played+discarded counts [R, T]."""
    tb = tables(game, fireworks.device)
    rank, f = tb.card_rank[None, :], _per_card(game, fireworks)  # [1, T], [R, T]
    gone = ((seen == tb.card_counts) & (rank >= f)).reshape(-1, game.colors, game.ranks).long()
    below = (gone.cumsum(-1) - gone).reshape(-1, game.card_types) > 0  # a gone rank below this one
    worthless = (rank < f) | below
    valuable = (seen == tb.card_counts - 1) & ~worthless
    return _Board(_to_mask(game, rank == f), _to_mask(game, worthless), _to_mask(game, valuable))


# ---- card-knowledge arithmetic on bit masks -------------------------------------------------------------
def popcount(m: torch.Tensor) -> torch.Tensor:
    """Bits set in each int32 mask (SWAR: a handful of element-wise ops, no table look-up)."""
    m = m - ((m >> 1) & 0x55555555)
    m = (m & 0x33333333) + ((m >> 2) & 0x33333333)
    m = (m + (m >> 4)) & 0x0F0F0F0F
    m = m + (m >> 8)
    return (m + (m >> 16)) & 0x3F


# The reference's three-valued "is this card in the table" (YES / MAYBE / NO), as one bool per answer: a card
# with identity set m (masks broadcast against table). An empty set counts as YES, as in the reference.
def all_in(m: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """YES: every identity the card may be is in table."""
    return (m & ~table) == 0


def maybe_in(m: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """MAYBE: some identities are in table and some are not."""
    return ((m & table) != 0) & ((m & ~table) != 0)


def none_in(m: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """NO: none is (and the set is not empty)."""
    return ((m & table) == 0) & (m != 0)


def prob(game: GameConfig, m: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Share of a card's identities in table, as the reference's float."""
    return popcount(m & table).float() / popcount(m).clamp(min=1).float()


def _log2(m: torch.Tensor) -> torch.Tensor:
    """Bit index of a power of two."""
    return popcount(m - 1).long()


def known_card(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(known, card id or -1): a card is known when one identity is left (or, as in the reference, none)."""
    known = _known(m)
    return known, torch.where(known & (m != 0), _log2(m), -1)


def card_rank(game: GameConfig, m: torch.Tensor) -> torch.Tensor:
    """The rank a card must have (0-based), -1 while more than one is possible."""
    low = (1 << game.ranks) - 1
    ranks = m & low
    for c in range(1, game.colors):
        ranks = ranks | ((m >> (c * game.ranks)) & low)
    return torch.where((ranks != 0) & ((ranks & (ranks - 1)) == 0), _log2(ranks), -1)


def _counts(game: GameConfig, cards: torch.Tensor) -> torch.Tensor:
    """[R, ...] card ids (-1: none) -> copies of each id per row [R, T]."""
    out = torch.zeros(cards.shape[0], game.card_types + 1, dtype=torch.long, device=cards.device)
    flat = (cards + 1).reshape(cards.shape[0], -1)
    return out.scatter_add_(1, flat, torch.ones_like(flat))[:, 1:]


def _player(x: torch.Tensor, who: torch.Tensor) -> torch.Tensor:
    """x [R, P, ...] at player who [R] -> [R, ...]."""
    idx = who.clamp(min=0).reshape(-1, *([1] * (x.dim() - 1))).expand(-1, 1, *x.shape[2:])
    return x.gather(1, idx).squeeze(1)


def _slot(x: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
    """x [R, H] at slot [R] (clamped at 0) -> [R]."""
    return x.gather(1, slot.clamp(min=0)[:, None]).squeeze(1)


def _put_player(x: torch.Tensor, who: torch.Tensor, value: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """x with x[r, who[r]] = value[r] where where[r]."""
    hit = (torch.arange(x.shape[1], device=x.device) == who[:, None]) & where[:, None]
    return torch.where(hit.reshape(*hit.shape, *([1] * (x.dim() - 2))), value[:, None], x)


def _at(h: int, slot: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """[R, H] bool: slot[r] where where[r]."""
    return (torch.arange(h, device=slot.device) == slot[:, None]) & where[:, None]


def discard_slot(present: torch.Tensor, sure: torch.Tensor, valuable: torch.Tensor,
                 worthless: torch.Tensor) -> torch.Tensor:
    """SmartBot's next discard, written once for its own knowledge (next_discard) and for the networks' facts
    (lbs.models.card_facts.next_discards): per slot [..., H] whether a card is held (`present`), surely
    playable or surely worthless (`sure`), surely valuable (`valuable`) and its share of worthless identities
    (`worthless`) -> [...] the slot, -1 for none. None while a held card is sure (it would play or throw that
    away) or every held card is surely valuable; else the held card most likely worthless among those not
    surely valuable, the oldest on ties."""
    cand = present & ~valuable
    slot = torch.where(cand, worthless, -1.0).argmax(-1)
    return torch.where((present & sure).any(-1) | ~cand.any(-1), -1, slot)


def next_discard(game: GameConfig, m: torch.Tensor, present: torch.Tensor, bd: _Board) -> torch.Tensor:
    """The slot a player with cards m [R, H] discards next (discard_slot), -1 for none."""
    sure = all_in(m, bd.playable[:, None]) | all_in(m, bd.worthless[:, None])
    return discard_slot(present, sure, all_in(m, bd.valuable[:, None]), prob(game, m, bd.worthless[:, None]))


def could_be_valuable_with_rank(game: GameConfig, m: torch.Tensor, rank: torch.Tensor,
                                bd: _Board) -> torch.Tensor:
    """[R]: a card m [R] whose value is open may be valuable if it has rank `rank` [R] (-1: never)."""
    with_rank = m & _masks(game, m.device).rank[rank.clamp(min=0)]
    return (rank >= 0) & (with_rank != 0) & maybe_in(m, bd.valuable) & ((with_rank & bd.valuable) != 0)


def no_warning_given(game: GameConfig, possible: torch.Tensor, present: torch.Tensor, mover: torch.Tensor,
                     where: torch.Tensor, deck: torch.Tensor, hints: torch.Tensor, bd: _Board,
                     slot: torch.Tensor | None = None) -> torch.Tensor:
    """The player after `mover` was not warned: the card they would discard next (`slot`, computed here if
    not given) is not valuable; only while cards are left to draw and a warning could have been given."""
    nxt = (mover + 1) % game.players
    cards = _player(possible, nxt)
    if slot is None:
        slot = next_discard(game, cards, _player(present, nxt), bd)
    where = where & (deck != 0) & (hints != 0) & (slot >= 0)
    cards = torch.where(_at(game.hand_size, slot, where), cards & ~bd.valuable[:, None], cards)
    return _put_player(possible, nxt, cards, where)


# ---- reading a move into the knowledge ------------------------------------------------------------------
def advance(game: GameConfig, state: SmartBotState, ob: _Obs) -> torch.Tensor:
    """The knowledge [R, P, H] at the start of this turn: the last move read in, then every unknown card
    cleared of the identities all of whose copies are accounted for."""
    possible = observe(game, state, ob) & torch.where(ob.present, -1, 0).int()
    return settle(game, possible, ob.present, ob.seen)


@_compiled_on_cpu
def observe(game: GameConfig, state: SmartBotState, ob: _Obs) -> torch.Tensor:
    """The knowledge after the last move, read against the board as it was before the move."""
    g, mk = game, _masks(game, ob.deck.device)
    p, h = g.players, g.hand_size
    possible = state.possible
    moved = _moved(state, ob)
    pre = _Board(state.playable, state.worthless, state.valuable)
    present = possible != 0  # hands before the move
    mover = ob.actor.clamp(min=0)
    is_card = moved & ((ob.kind == PLAY) | (ob.kind == DISCARD))
    is_hint = moved & ((ob.kind == REVEAL_COLOR) | (ob.kind == REVEAL_RANK))

    # the card the player after the mover would discard next, before the move (a hint may warn about it)
    nxt = (mover + 1) % p
    to_discard = next_discard(g, _player(possible, nxt), _player(present, nxt), pre)
    # a play or discard is no warning
    possible = no_warning_given(g, possible, present, mover, is_card, state.deck, state.hints, pre,
                                to_discard)
    # discarding a card known to be playable: the first partner (in seat order) holding it newest has it,
    # and if I see nobody, I have it
    finesse = discard_finesse(g, state, ob)
    newest_slot = present.sum(-1) - 1  # [R, P]
    newest = ob.hands.gather(2, newest_slot.clamp(min=0)[..., None]).squeeze(2)  # [R, P], -1 for me
    rel = torch.arange(p, device=possible.device)
    seat = (rel[None, :] + state.seat[:, None]) % p
    holds = (newest == ob.card[:, None]) & (rel[None, :] != mover[:, None]) & (rel[None, :] != 0)
    holder = torch.where(holds.any(1), torch.where(holds, seat, p).argmin(1), 0)
    cards = _player(possible, holder)
    at = _at(h, _player(newest_slot, holder), finesse)
    cards = torch.where(at, cards & mk.card[ob.card.clamp(min=0)][:, None], cards)
    possible = _put_player(possible, holder, cards, finesse)
    # the card leaves the hand: later cards move down one slot and a new card (if one was drawn) comes last
    cards = _player(possible, mover)
    idx = torch.arange(h, device=possible.device)
    shifted = cards.gather(1, (idx[None, :] + (idx[None, :] >= ob.slot[:, None]).long()).clamp(max=h - 1))
    drawn = torch.where(state.deck != 0, mk.full, 0).int()
    shifted = torch.where(idx[None, :] == h - 1, drawn[:, None], shifted)
    possible = _put_player(possible, mover, shifted, is_card)
    return _observe_hint(g, possible, present, state, ob, is_hint, pre, to_discard)


def _moved(state: SmartBotState, ob: _Obs) -> torch.Tensor:
    """[R]: a move was made since the state last read the board (not before the first observation)."""
    return (state.deck >= 0) & ((ob.hints != state.hints) | (ob.seen.sum(1) != state.used))


def discard_finesse(game: GameConfig, state: SmartBotState, ob: _Obs) -> torch.Tensor:
    """[R]: the last move discarded a card its player knew to be playable, so the observer reads the
    partners' newest cards to locate it (the one knowledge update that depends on a hand it sees)."""
    thrown = _slot(_player(state.possible, ob.actor.clamp(min=0)), ob.slot)
    known, _ = known_card(thrown)
    return _moved(state, ob) & (ob.kind == DISCARD) & known & all_in(thrown, state.playable)


def _observe_hint(game: GameConfig, possible: torch.Tensor, present: torch.Tensor, state: SmartBotState,
                  ob: _Obs, is_hint: torch.Tensor, pre: _Board, slot: torch.Tensor) -> torch.Tensor:
    """A hint: the touched cards have the hinted colour or rank and the others have not; a warning marks its
    card valuable, any other hint marks the newest card it leaves possibly playable as playable (unless it
    showed a playable card outright, or gives back a hint token at 8 tokens)."""
    g, mk = game, _masks(game, possible.device)
    p, h = g.players, g.hand_size
    mover, to = ob.actor.clamp(min=0), ob.target.clamp(min=0)
    is_rank = is_hint & (ob.kind == REVEAL_RANK)
    nxt = (mover + 1) % p
    reclaim = is_rank & (state.hints == g.max_info_tokens) & (mover == (to + 1) % p) & ob.reveal[:, 0]
    cards = _player(possible, to)  # [R, H]
    on_slot = _at(h, slot, slot >= 0)
    warning = (is_rank & ~reclaim & (to == nxt) & (ob.reveal & on_slot).any(1)
               & could_be_valuable_with_rank(g, _slot(cards, slot), ob.rank, pre))
    cards = torch.where(on_slot & warning[:, None], cards & pre.valuable[:, None], cards)
    hinted = torch.where(ob.kind == REVEAL_COLOR, mk.color[ob.color.clamp(min=0)],
                         mk.rank[ob.rank.clamp(min=0)])[:, None]  # [R, 1]
    in_hand = _player(present, to)
    touched = ob.reveal & in_hand
    new = torch.where(touched, cards & hinted, cards & ~hinted)
    was_maybe = in_hand & maybe_in(cards, pre.playable[:, None])
    identified = (was_maybe & all_in(new, pre.playable[:, None])).any(1)
    inferred = was_maybe & touched & maybe_in(new, pre.playable[:, None])
    newest = torch.where(inferred, torch.arange(h, device=cards.device), -1).max(1).values
    mark = is_hint & ~identified & (newest >= 0) & ~warning & ~reclaim
    new = torch.where(_at(h, newest, mark), new & pre.playable[:, None], new)
    possible = _put_player(possible, to, new, is_hint)
    # any hint but one to the player after the hinter tells that player they were not warned
    return no_warning_given(g, possible, present, mover, is_hint & (to != nxt), state.deck, state.hints, pre)


def settle(game: GameConfig, possible: torch.Tensor, present: torch.Tensor,
           seen: torch.Tensor) -> torch.Tensor:
    """Rule out of every unknown card the identities whose copies are all played, discarded or located in a
    known card, again while that locates new cards (at most once per card in the hands, plus one). On the
    CPU a round after the first takes only the rows where the last round made a card known, and none once
    no row did: a round reads the known cards alone, so a row whose known cards stay as they were would
    only rule out again what it ruled out already. On an accelerator every round takes every row, so the
    step never waits on the host."""
    tb = tables(game, possible.device)
    rounds = game.players * game.hand_size + 1
    if not _stop_at_fixed_point(possible.device):
        for _ in range(rounds):
            possible = _settle_round(game, tb, possible, present, seen)
        return possible
    rows = torch.arange(possible.shape[0], device=possible.device)  # the rows the last round took
    before, after = possible, _settle_round(game, tb, possible, present, seen)
    out = after  # a new tensor: the later rounds write their rows into it
    for _ in range(rounds - 1):
        changed = (_known(after) & ~_known(before)).flatten(1).any(1).nonzero().squeeze(1)
        if not changed.numel():
            break
        rows, before = rows.index_select(0, changed), after.index_select(0, changed)
        after = _settle_round(game, tb, before, present.index_select(0, rows), seen.index_select(0, rows))
        out.index_copy_(0, rows, after)
    return out


def _settle_round(game: GameConfig, tb: Tables, possible: torch.Tensor, present: torch.Tensor,
                  seen: torch.Tensor) -> torch.Tensor:
    """One round of settle on every row given."""
    known, card = known_card(possible)
    located = _counts(game, torch.where(known & present, card, -1))
    gone = _to_mask(game, seen + located >= tb.card_counts)
    return torch.where(known, possible, possible & ~gone[:, None, None])


def _known(m: torch.Tensor) -> torch.Tensor:
    """known_card's first answer alone: at most one identity left."""
    return (m & (m - 1)) == 0


def _stop_at_fixed_point(device: torch.device) -> bool:
    """Reading whether a round changed anything costs nothing on the CPU and a host sync elsewhere."""
    return device.type == "cpu"


# ---- choosing a move ------------------------------------------------------------------------------------
@_compiled_on_cpu
def decide(game: GameConfig, possible: torch.Tensor, ob: _Obs, bd: _Board) -> torch.Tensor:
    """SmartBot's move [R] for the observer (relative player 0) of each row (bd: the board now): the first
    rule that applies, in the reference's order."""
    g, tb = game, tables(game, possible.device)
    p, h, k = g.players, g.hand_size, g.ranks
    mine, here = possible[:, 0], ob.present[:, 0]  # [R, H]
    # my cards as I see them: also ruling out the identities whose copies I see elsewhere
    known, card = known_card(mine)
    seen = ob.seen + _counts(g, ob.hands) + _counts(g, torch.where(known & here, card, -1))
    eye = torch.where(known, mine, mine & ~_to_mask(g, seen >= tb.card_counts)[:, None])
    playable, worthless = bd.playable[:, None], bd.worthless[:, None]
    play_yes, play_no = all_in(mine, playable), none_in(mine, playable)

    # play the card I know (or see) is playable: one nobody knows I know first, then the lowest
    ok = here & ~play_no & all_in(eye, playable)
    eye_rank = card_rank(g, eye)
    fit = torch.where(eye_rank >= 0, k - eye_rank, k + 2).float() + 100.0 * (~play_yes).float()
    play_low, can_play_low = torch.where(ok, fit, -1.0).argmax(1), ok.any(1)
    # a mystery card when the deck is nearly out: the likeliest playable, the newest on ties
    ok = here & maybe_in(eye, playable)
    mystery = h - 1 - torch.where(ok, prob(g, eye, playable), -1.0).flip(1).argmax(1)
    can_mystery = (ob.deck <= torch.where(ob.lives >= MAX_LIVES, 3, 1)) & ok.any(1)
    # a card known (or seen) to be worthless: the one others are least sure of first
    ok = here & (all_in(mine, worthless) | (maybe_in(mine, worthless) & all_in(eye, worthless)))
    junk, can_junk = torch.where(ok, 2.0 - prob(g, mine, worthless).double(), -1.0).argmax(1), ok.any(1)
    old = next_discard(g, mine, here, bd)
    # every card valuable: the highest rank I know
    last_resort = torch.where(here, card_rank(g, mine), -2).argmax(1)

    # the next player is about to discard a valuable card: a hint that makes them play, else a warning
    warn_slot = next_discard(g, possible[:, 1], ob.present[:, 1], bd)
    hint_fit, hint_move = best_hints(g, possible, ob, bd, warn_slot)  # [R, P-1]
    helpful = hint_move.gather(1, hint_fit.argmax(1)[:, None]).squeeze(1)
    warn_card = _slot(ob.hands[:, 1], warn_slot).clamp(min=0)
    must_warn = (ob.hints > 0) & (warn_slot >= 0) & (((bd.valuable >> warn_card) & 1) == 1)
    warning = torch.where(hint_fit[:, 0] > 0, hint_move[:, 0], rank_hint(g, 1, tb.card_rank[warn_card]))
    # discard finesse: a known playable card that exactly one partner holds as their newest card
    newest = ob.hands[:, 1:].gather(2, (ob.present[:, 1:].sum(-1) - 1).clamp(min=0)[..., None])[..., 0]
    copies = (newest[:, None, :] == card[:, :, None]).sum(-1)  # [R, H]
    ok = here & known & (card >= 0) & none_in(mine, bd.valuable[:, None]) & play_yes & (copies == 1)
    finesse = ok.long().argmax(1)
    # all tokens: a rank hint on the oldest card of the player before me (no discard is allowed)
    full_hints = rank_hint(g, p - 1, tb.card_rank[ob.hands[:, p - 1, 0].clamp(min=0)])

    rules = [
        ((ob.deck == 0) & can_play_low, h + play_low),
        ((ob.deck == 0) & can_mystery, h + mystery),
        (must_warn, warning),
        ((ob.hints < g.max_info_tokens) & ok.any(1), finesse),
        (can_play_low, h + play_low),
        ((ob.hints > 0) & (hint_fit.max(1).values > 0), helpful),
        (can_mystery, h + mystery),
        (ob.hints == g.max_info_tokens, full_hints),
        (can_junk, junk),
        (old >= 0, old),
    ]
    move = last_resort
    for applies, choice in reversed(rules):
        move = torch.where(applies, choice, move)
    return move


def color_hint(game: GameConfig, offset: int | torch.Tensor, color: torch.Tensor) -> torch.Tensor:
    """Move id of a colour hint to the player `offset` seats on (GameConfig.move_table's numbering)."""
    return 2 * game.hand_size + (offset - 1) * game.colors + color


def rank_hint(game: GameConfig, offset: int | torch.Tensor, rank: torch.Tensor) -> torch.Tensor:
    """Move id of a rank hint to the player `offset` seats on."""
    g = game
    return 2 * g.hand_size + (g.players - 1) * g.colors + (offset - 1) * g.ranks + rank


def best_hints(game: GameConfig, possible: torch.Tensor, ob: _Obs, bd: _Board,
               d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per partner [R, P-1]: (fitness, move) of the hint that shows them a playable card without misleading
    them and rules out the most identities; colours before ranks, the first on ties; fitness -1: none.
    d [R]: the slot the next player would discard next."""
    g, tb, mk = game, tables(game, possible.device), _masks(game, possible.device)
    p, h, c = g.players, g.hand_size, g.colors
    dev = possible.device
    old = possible[:, 1:]  # [R, Q, H]
    hands, here = ob.hands[:, 1:], ob.present[:, 1:]
    cards = hands.clamp(min=0)
    hint = mk.hint[None, None, :, None]  # [1, 1, N, 1]
    match = (((hint >> cards[:, :, None, :]) & 1) == 1) & here[:, :, None, :]  # [R, Q, N, H]
    new = torch.where(match, old[:, :, None] & hint, old[:, :, None] & ~hint)
    playable = bd.playable[:, None, None, None]
    open_ = (here & maybe_in(old, playable[..., 0]))[:, :, None]  # [R, Q, 1, H]
    reveals = (open_ & all_in(new, playable)).any(-1)
    ambiguous = open_ & maybe_in(new, playable) & match
    newest = torch.where(ambiguous, torch.arange(h, device=dev), -1).max(-1).values  # [R, Q, N]
    really = ((bd.playable[:, None, None] >> cards) & 1 == 1) & here  # [R, Q, H]
    newest_playable = really.gather(2, newest.clamp(min=0)) & (newest >= 0)
    # a rank hint on the next player's discard card that could make it valuable would read as a warning
    d_rank = tb.card_rank[_slot(ob.hands[:, 1], d).clamp(min=0)]
    avoid = torch.where((d >= 0) & could_be_valuable_with_rank(g, _slot(possible[:, 1], d), d_rank, bd),
                        d_rank + c, -1)  # hint index to avoid [R]
    avoided = torch.zeros_like(reveals)
    avoided[:, 0] = torch.arange(c + g.ranks, device=dev)[None, :] == avoid[:, None]
    ok = (reveals | newest_playable) & match.any(-1) & ~avoided
    gain = (popcount(old) * here).sum(-1)[:, :, None] - (popcount(new) * here[:, :, None]).sum(-1)
    fit = torch.where(ok, gain, -1)
    best = fit.argmax(-1)  # the first of the best
    offsets = torch.arange(1, p, device=dev)[None, :]
    move = torch.where(best < c, color_hint(g, offsets, best), rank_hint(g, offsets, best - c))
    return fit.gather(2, best[..., None]).squeeze(-1), move
