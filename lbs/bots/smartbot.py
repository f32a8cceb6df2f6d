"""SmartBot (Arthur O'Dwyer's rule-based Hanabi bot), batched: B games' seats decide at once.

Rules learnt from the reference (SmartBot.cc in Quuxplusone/Hanabi), re-written for tensors. The bot keeps,
for every (player, slot), the set of card identities still possible. That set is built from public events
alone (hints, plays, discards and the conventions that read them), so it is the bot's state here, one copy
per seat, advanced from each observation's last-action section; what the deciding seat sees (the other
hands) enters only inside a decision. Conventions:

- a hint marks the newest touched card whose playability it leaves open as playable, unless it showed a
  playable card outright;
- the player after the hinter expects a warning before discarding a valuable card (the last copy): a value
  hint on the card they would discard next is that warning, and any other move says that card is not valuable;
- discarding a known playable card that a partner also holds as their newest card tells them so ("discard
  finesse");
- with the deck (nearly) empty, play the card most likely to be playable.

The reference caches playable / valuable / worthless per card and refreshes the caches lazily; every cached
value it reads equals the value computed from the current identity set and board, so they are recomputed
here (the fixture test checks the equivalence move for move).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..hanabi.config import LAST_ACTION_TYPE_ORDER, PLAY, REVEAL_COLOR, REVEAL_RANK, DISCARD, GameConfig
from ..hanabi.engine import tables

NO, MAYBE, YES = 0, 1, 2


class SmartBotState(NamedTuple):
    """One seat's copy of the public card knowledge, and the board it last saw (to read the next move by)."""

    possible: torch.Tensor  # [R, P, H, T] bool: identities each (player, slot) may still be, observer first
    seat: torch.Tensor  # [R] long: the observer's absolute seat (a discard finesse scans seats in order)
    fireworks: torch.Tensor  # [R, C] long: cards played per colour, as last seen
    seen: torch.Tensor  # [R, T] long: copies played or discarded per card id, as last seen
    deck: torch.Tensor  # [R] long: cards left in the deck as last seen; -1 before the first observation
    hints: torch.Tensor  # [R] long: hint tokens as last seen


class _Obs(NamedTuple):
    """What SmartBot reads from a canonical observation [R, D] (observer-relative players)."""

    hands: torch.Tensor  # [R, P, H] long card id of each partner's cards (row 0, the observer's own: -1)
    present: torch.Tensor  # [R, P, H] bool: the slot holds a card
    fireworks: torch.Tensor  # [R, C] long
    seen: torch.Tensor  # [R, T] long: played + discarded copies per card id
    deck: torch.Tensor  # [R] long
    hints: torch.Tensor  # [R] long
    lives: torch.Tensor  # [R] long
    actor: torch.Tensor  # [R] long relative mover of the last move (-1: none)
    kind: torch.Tensor  # [R] long move type (DISCARD / PLAY / REVEAL_*), -1 none
    target: torch.Tensor  # [R] long relative hint target
    color: torch.Tensor  # [R] long hinted colour
    rank: torch.Tensor  # [R] long hinted rank
    reveal: torch.Tensor  # [R, H] bool: the target's slots the hint touched
    slot: torch.Tensor  # [R] long slot played or discarded
    card: torch.Tensor  # [R] long card played or discarded


class _Board(NamedTuple):
    """Per-row card-id tables: which identities are playable / worthless / valuable now."""

    playable: torch.Tensor  # [R, T] bool
    worthless: torch.Tensor  # [R, T] bool
    valuable: torch.Tensor  # [R, T] bool
    seen: torch.Tensor  # [R, T] long


def check_game(game: GameConfig) -> None:
    """SmartBot's rules generalise to any deck, hand size and hint count; its end-game table is written for
    at most three lives."""
    if game.max_life_tokens > 3:
        raise ValueError(f"GameConfig.max_life_tokens={game.max_life_tokens}: SmartBot plays with at most 3 lives")


class SmartBot:
    """The blueprint interface of the networks: `initial_state(rows)` and `step(priv, publ, legal, state) ->
    (scores, state)`, rows n * P + p being seat p of game n. Scores are 1 on SmartBot's move and 0 elsewhere:
    they mark the move and are no value."""

    name = "smartbot"
    has_value = False
    hidden_is_public = True

    def __init__(self, game: GameConfig, device: torch.device | str = "cpu"):
        check_game(game)
        self.game = game
        self.device = torch.device(device)

    # ---- state ------------------------------------------------------------------------------------------
    def initial_state(self, rows: int, device: torch.device | str | None = None) -> SmartBotState:
        g = self.game
        dev = torch.device(device) if device is not None else self.device
        z = torch.zeros(rows, dtype=torch.long, device=dev)
        return SmartBotState(
            possible=torch.ones(rows, g.players, g.hand_size, g.card_types, dtype=torch.bool, device=dev),
            seat=torch.arange(rows, device=dev) % g.players,
            fireworks=torch.zeros(rows, g.colors, dtype=torch.long, device=dev),
            seen=torch.zeros(rows, g.card_types, dtype=torch.long, device=dev),
            deck=z - 1,
            hints=z,
        )

    def step(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor,
             state: SmartBotState) -> tuple[torch.Tensor, SmartBotState]:
        """Read the last move into the knowledge, then choose: scores [R, A] (1 on the move)."""
        del publ  # the canonical observation holds everything SmartBot reads
        g = self.game
        ob = decode(g, priv)
        possible = observe(g, state, ob)
        possible = possible & ob.present[..., None]
        possible = settle(g, possible, ob.present, board(g, ob.fireworks, ob.seen))
        move = decide(g, possible, ob)
        scores = torch.zeros(legal.shape, dtype=torch.float32, device=legal.device)
        scores.scatter_(1, move[:, None], 1.0)
        new = SmartBotState(possible, state.seat, ob.fireworks, ob.seen, ob.deck, ob.hints)
        return scores, new


# ---- reading observations -------------------------------------------------------------------------------
def decode(game: GameConfig, obs: torch.Tensor) -> _Obs:
    g, lay, tb = game, game.layout, tables(game, obs.device)
    r_, p, h, t, c, k = obs.shape[0], g.players, g.hand_size, g.card_types, g.colors, g.ranks
    x = obs != 0
    ids = torch.arange(t, device=obs.device)
    onehot = lay.view(x, "hands.cards").reshape(r_, p - 1, h, t)
    others = torch.where(onehot.any(-1), (onehot.long() * ids).sum(-1), -1)
    hands = torch.cat([torch.full((r_, 1, h), -1, dtype=torch.long, device=obs.device), others], 1)
    size = h - lay.view(x, "hands.missing").long()  # [R, P]
    present = torch.arange(h, device=obs.device) < size[..., None]
    top = lay.view(x, "board.fireworks").reshape(r_, c, k).long()
    fireworks = (top * torch.arange(1, k + 1, device=obs.device)).sum(-1)
    discarded = torch.zeros(r_, t, dtype=torch.long, device=obs.device)
    discarded.index_add_(1, tb.instance_card, lay.view(x, "discards").long())
    played = (tb.card_rank[None, :] < fireworks[:, tb.card_color]).long()

    def index(name: str) -> torch.Tensor:  # one-hot section -> index, -1 if empty
        v = lay.view(x, name)
        return torch.where(v.any(-1), v.long().argmax(-1), -1)

    kind_bit = index("last_action.type")
    order = torch.tensor(LAST_ACTION_TYPE_ORDER, device=obs.device)
    return _Obs(
        hands=hands,
        present=present,
        fireworks=fireworks,
        seen=discarded + played,
        deck=lay.view(x, "board.deck").long().sum(-1),
        hints=lay.view(x, "board.info").long().sum(-1),
        lives=lay.view(x, "board.lives").long().sum(-1),
        actor=index("last_action.actor"),
        kind=torch.where(kind_bit >= 0, order[kind_bit.clamp(min=0)], -1),
        target=index("last_action.target"),
        color=index("last_action.color"),
        rank=index("last_action.rank"),
        reveal=lay.view(x, "last_action.reveal"),
        slot=index("last_action.slot"),
        card=index("last_action.card"),
    )


def board(game: GameConfig, fireworks: torch.Tensor, seen: torch.Tensor) -> _Board:
    """Playable, worthless (below the firework, or above a rank whose copies are all gone) and valuable
    (the last copy of a card still needed) identities, from fireworks [R, C] and played+discarded counts."""
    tb = tables(game, fireworks.device)
    rank, f = tb.card_rank[None, :], fireworks[:, tb.card_color]  # [1, T], [R, T]
    gone = (seen == tb.card_counts) & (rank >= f)  # every copy of a still-needed card is out
    blocked = gone.reshape(-1, game.colors, game.ranks).long().cumsum(-1) - gone.reshape(
        -1, game.colors, game.ranks).long()  # gone ranks strictly below each rank
    worthless = (rank < f) | (blocked.reshape(-1, game.card_types) > 0)
    valuable = (seen == tb.card_counts - 1) & ~worthless
    return _Board(rank == f, worthless, valuable, seen)


# ---- card-knowledge arithmetic --------------------------------------------------------------------------
def tri(possible: torch.Tensor, table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(NO / MAYBE / YES, probability) that a card with identity set possible [..., T] is in table [..., T]:
    YES when every possibility is (an empty set counts as YES, as in the reference)."""
    total = possible.sum(-1)
    yes = (possible & table).sum(-1)
    value = torch.where(yes == total, YES, torch.where(yes > 0, MAYBE, NO))
    return value, yes.float() / total.clamp(min=1).float()


def _rows(x: torch.Tensor, dims: int) -> torch.Tensor:
    """A per-row table [R, T] broadcast against a [R, ..., T] tensor with `dims` middle dimensions."""
    return x.reshape(x.shape[0], *([1] * dims), x.shape[-1])


def known_card(game: GameConfig, possible: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(known, card id or -1) per card [...]: known when the colour and the rank are each pinned down."""
    c, k = game.colors, game.ranks
    grid = possible.reshape(*possible.shape[:-1], c, k)
    colors = grid.any(-1).sum(-1)
    ranks = grid.any(-2).sum(-1)
    known = (colors <= 1) & (ranks <= 1)
    card = torch.where(known & (colors == 1), possible.long().argmax(-1), -1)
    return known, card


def card_rank(game: GameConfig, possible: torch.Tensor) -> torch.Tensor:
    """The rank a card must have (0-based), -1 when more than one is possible."""
    ranks = possible.reshape(*possible.shape[:-1], game.colors, game.ranks).any(-2)
    return torch.where(ranks.sum(-1) == 1, ranks.long().argmax(-1), -1)


def _player(x: torch.Tensor, who: torch.Tensor) -> torch.Tensor:
    """x [R, P, ...] at player who [R] -> [R, ...]."""
    idx = who.clamp(min=0).reshape(-1, *([1] * (x.dim() - 1))).expand(-1, 1, *x.shape[2:])
    return x.gather(1, idx).squeeze(1)


def _put_player(x: torch.Tensor, who: torch.Tensor, value: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """x with x[r, who[r]] = value[r] where where[r]."""
    hit = (torch.arange(x.shape[1], device=x.device) == who[:, None]) & where[:, None]
    return torch.where(hit.reshape(*hit.shape, *([1] * (x.dim() - 2))), value[:, None], x)


def _slot_mask(h: int, slot: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """[R, H] bool: slot[r] where where[r]."""
    return (torch.arange(h, device=slot.device) == slot[:, None]) & where[:, None]


def next_discard(game: GameConfig, possible: torch.Tensor, present: torch.Tensor, bd: _Board) -> torch.Tensor:
    """The slot a player [R, H, T] would discard next, -1 if they would rather play or throw away a card
    (a known playable or worthless one) or every card is known valuable: the most likely worthless card
    that is not known valuable, the oldest on ties."""
    playable, _ = tri(possible, _rows(bd.playable, 1))
    worthless, p_worthless = tri(possible, _rows(bd.worthless, 1))
    valuable, _ = tri(possible, _rows(bd.valuable, 1))
    block = (present & ((playable == YES) | (worthless == YES))).any(-1)
    cand = present & (valuable != YES)
    idx = torch.where(cand, p_worthless, -1.0).argmax(-1)
    return torch.where(block | ~cand.any(-1), -1, idx)


def could_be_valuable_with_rank(game: GameConfig, possible: torch.Tensor, rank: torch.Tensor,
                                bd: _Board) -> torch.Tensor:
    """[R]: a card [R, T] whose value is open may be valuable if it has rank `rank` [R] (-1: False)."""
    tb = tables(game, possible.device)
    with_rank = possible & (tb.card_rank[None, :] == rank[:, None])
    valuable, _ = tri(possible, bd.valuable)
    return (rank >= 0) & with_rank.any(-1) & (valuable == MAYBE) & (with_rank & bd.valuable).any(-1)


def no_warning_given(game: GameConfig, possible: torch.Tensor, present: torch.Tensor, mover: torch.Tensor,
                     where: torch.Tensor, deck: torch.Tensor, hints: torch.Tensor, bd: _Board) -> torch.Tensor:
    """The player after `mover` was not warned: the card they would discard next is not valuable (only while
    cards are left to draw and a warning could have been given)."""
    p, h = game.players, game.hand_size
    nxt = (mover + 1) % p
    slot = next_discard(game, _player(possible, nxt), _player(present, nxt), bd)
    where = where & (deck != 0) & (hints != 0) & (slot >= 0)
    cards = _player(possible, nxt)
    cards = torch.where(_slot_mask(h, slot, where)[..., None], cards & ~bd.valuable[:, None, :], cards)
    return _put_player(possible, nxt, cards, where)


# ---- reading a move into the knowledge ------------------------------------------------------------------
def observe(game: GameConfig, state: SmartBotState, ob: _Obs) -> torch.Tensor:
    """The knowledge after the last move, read with the board as it was before that move."""
    g, tb = game, tables(game, ob.deck.device)
    p, h, t = g.players, g.hand_size, g.card_types
    possible = state.possible
    moved = (state.deck >= 0) & ((ob.hints != state.hints) | (ob.seen.sum(1) != state.seen.sum(1)))
    pre = board(g, state.fireworks, state.seen)
    # the hand sizes before the move: the mover's hand lost a card only if none was drawn
    present = possible.any(-1)
    mover = ob.actor.clamp(min=0)
    is_card = moved & ((ob.kind == PLAY) | (ob.kind == DISCARD))
    is_hint = moved & ((ob.kind == REVEAL_COLOR) | (ob.kind == REVEAL_RANK))

    # plays and discards: the player after the mover was not warned
    possible = no_warning_given(g, possible, present, mover, is_card, state.deck, state.hints, pre)
    # a discarded card known to be playable: the partner (seat order) whose newest card it is, else me
    slot_cards = _player(possible, mover)  # [R, H, T]
    thrown = _slot_mask(h, ob.slot, is_card)
    thrown_poss = (slot_cards & thrown[..., None]).any(1)  # [R, T]
    known, _ = known_card(g, thrown_poss)
    playable, _ = tri(thrown_poss, pre.playable)
    finesse = is_card & (ob.kind == DISCARD) & known & (playable == YES)
    newest_slot = present.long().sum(-1) - 1  # [R, P]
    newest = ob.hands.gather(2, newest_slot.clamp(min=0)[..., None]).squeeze(2)  # [R, P] (-1 for me)
    rel = torch.arange(p, device=possible.device)
    absolute = (rel[None, :] + state.seat[:, None]) % p  # [R, P]
    holder_ok = (newest == ob.card[:, None]) & (rel[None, :] != mover[:, None]) & (rel[None, :] != 0)
    first = torch.where(holder_ok, absolute, p).argmin(1)  # relative player with the lowest seat
    holder = torch.where(holder_ok.any(1), first, 0)
    card_mask = torch.nn.functional.one_hot(ob.card.clamp(min=0), t).bool()  # [R, T]
    hold_cards = _player(possible, holder)
    hold_slot = _slot_mask(h, _player(newest_slot, holder), finesse)
    hold_cards = torch.where(hold_slot[..., None], hold_cards & card_mask[:, None, :], hold_cards)
    possible = _put_player(possible, holder, hold_cards, finesse)
    # the played or discarded card leaves the hand; later cards shift down and a new card comes last
    cards = _player(possible, mover)
    idx = torch.arange(h, device=possible.device)
    src = (idx[None, :] + (idx[None, :] >= ob.slot[:, None]).long()).clamp(max=h - 1)
    shifted = cards.gather(1, src[..., None].expand(-1, -1, t))
    last = idx[None, :] == h - 1
    fresh = (state.deck != 0)[:, None] & last
    shifted = torch.where(last[..., None], fresh[..., None].expand(-1, -1, t), shifted)
    possible = _put_player(possible, mover, shifted, is_card)
    # hints
    return _observe_hint(g, possible, present, state, ob, is_hint, pre, tb)


def _observe_hint(game, possible, present, state, ob, is_hint, pre, tb) -> torch.Tensor:
    g = game
    p, h = g.players, g.hand_size
    mover, to = ob.actor.clamp(min=0), ob.target.clamp(min=0)
    is_rank = is_hint & (ob.kind == REVEAL_RANK)
    nxt = (mover + 1) % p
    # a rank hint on the card the next player would discard, which that rank may make valuable: a warning
    slot = next_discard(g, _player(possible, nxt), _player(present, nxt), pre)
    reclaim = is_rank & (state.hints == g.max_info_tokens) & (mover == (to + 1) % p) & ob.reveal[:, 0]
    cards = _player(possible, to)  # [R, H, T]
    on_slot = _slot_mask(h, slot, slot >= 0)
    target_card = (cards & on_slot[..., None]).any(1)
    warning = (is_rank & ~reclaim & (to == nxt) & (slot >= 0) & (ob.reveal & on_slot).any(1)
               & could_be_valuable_with_rank(g, target_card, ob.rank, pre))
    cards = torch.where((on_slot & warning[:, None])[..., None], cards & pre.valuable[:, None, :], cards)
    # every touched card has the hinted colour / rank, every other card has not
    hinted = torch.where(ob.kind[:, None] == REVEAL_COLOR, tb.card_color[None, :] == ob.color[:, None],
                         tb.card_rank[None, :] == ob.rank[:, None])  # [R, T]
    was, _ = tri(cards, pre.playable[:, None, :])
    touched = ob.reveal & present.gather(1, to[:, None, None].expand(-1, 1, h)).squeeze(1)
    new = torch.where(touched[..., None], cards & hinted[:, None, :], cards & ~hinted[:, None, :])
    now, _ = tri(new, pre.playable[:, None, :])
    in_hand = _player(present, to)
    was_maybe = in_hand & (was == MAYBE)
    identified = (was_maybe & (now == YES)).any(1)
    inferred = was_maybe & touched & (now == MAYBE)
    newest = torch.where(inferred, torch.arange(h, device=cards.device), -1).max(1).values
    mark = is_hint & ~identified & (newest >= 0) & ~warning & ~reclaim
    new = torch.where(_slot_mask(h, newest, mark)[..., None], new & pre.playable[:, None, :], new)
    possible = _put_player(possible, to, new, is_hint)
    # any hint but a warning (one to the player after the hinter) tells that player they were not warned
    return no_warning_given(g, possible, present, mover, is_hint & (to != nxt), state.deck, state.hints, pre)


def settle(game: GameConfig, possible: torch.Tensor, present: torch.Tensor, bd: _Board) -> torch.Tensor:
    """Rule out of every unknown card the identities whose copies are all played, discarded or located in a
    known card; repeated until no more cards become known (each round can locate new cards)."""
    tb = tables(game, possible.device)
    for _ in range(game.players * game.hand_size + 1):
        known, card = known_card(game, possible)
        located = torch.nn.functional.one_hot((card + 1) * present, game.card_types + 1)[..., 1:]
        located = (located * (known & present)[..., None]).sum((1, 2))  # [R, T]
        gone = bd.seen + located >= tb.card_counts
        possible = torch.where(known[..., None], possible, possible & ~gone[:, None, None, :])
    return possible


# ---- choosing a move ------------------------------------------------------------------------------------
def decide(game: GameConfig, possible: torch.Tensor, ob: _Obs) -> torch.Tensor:
    """SmartBot's move [R] for the observer (relative player 0) of each row."""
    g, tb = game, tables(game, possible.device)
    p, h, t, c, k = g.players, g.hand_size, g.card_types, g.colors, g.ranks
    dev = possible.device
    bd = board(g, ob.fireworks, ob.seen)
    slots = torch.arange(h, device=dev)
    mine, here = possible[:, 0], ob.present[:, 0]  # [R, H, T], [R, H]
    # what I see: my known cards and everyone else's cards
    known, card = known_card(g, mine)
    visible = torch.nn.functional.one_hot((ob.hands + 1).clamp(min=0), t + 1)[..., 1:].sum((1, 2))
    mine_known = torch.nn.functional.one_hot(((card + 1) * (known & here)), t + 1)[..., 1:].sum(1)
    gone = bd.seen + visible + mine_known >= tb.card_counts  # [R, T]
    eye = torch.where(known[..., None], mine, mine & ~gone[:, None, :])

    play, _ = tri(mine, _rows(bd.playable, 1))
    eye_play, eye_p_play = tri(eye, _rows(bd.playable, 1))
    worth, p_worth = tri(mine, _rows(bd.worthless, 1))
    eye_worth, _ = tri(eye, _rows(bd.worthless, 1))
    value, _ = tri(mine, _rows(bd.valuable, 1))

    # play the lowest card I know (or see) is playable, preferring ones nobody else knows I know
    ok = here & (play != NO) & (eye_play == YES)
    eye_rank = card_rank(g, eye)
    fit = torch.where(eye_rank >= 0, k - eye_rank, k + 2).float() + 100.0 * (play != YES).float()
    play_low = torch.where(ok, fit, -1.0).argmax(1)
    can_play_low = ok.any(1)
    # play a mystery card when the deck is nearly out: the likeliest, the newest on ties
    threshold = torch.where(ob.lives >= 3, 3, 1)
    ok = here & (eye_play == MAYBE)
    mystery = h - 1 - torch.where(ok, eye_p_play, -1.0).flip(1).argmax(1)
    can_mystery = (ob.deck <= threshold) & ok.any(1)
    # discard a card known or seen to be worthless
    ok = here & (worth != NO) & ((worth == YES) | (eye_worth == YES))
    junk = torch.where(ok, 2.0 - p_worth.double(), -1.0).argmax(1)
    can_junk = ok.any(1)
    # discard the next card of the usual order
    old = next_discard(g, mine, here, bd)
    # last resort: every card is valuable: the highest rank I know
    ranks = card_rank(g, mine)
    last_resort = torch.where(here, ranks, -2).argmax(1)

    # hints: the best hint per partner, then the warning and the discard finesse
    hint_fit, hint_move = best_hints(g, possible, ob, bd)  # [R, P-1]
    best_partner = hint_fit.argmax(1)
    helpful = hint_move.gather(1, best_partner[:, None]).squeeze(1)
    can_help = (ob.hints > 0) & (hint_fit.max(1).values > 0)

    warn_slot = next_discard(g, possible[:, 1], ob.present[:, 1], bd)
    warn_card = ob.hands[:, 1].gather(1, warn_slot.clamp(min=0)[:, None]).squeeze(1)
    must_warn = (ob.hints > 0) & (warn_slot >= 0) & bd.valuable.gather(1, warn_card.clamp(min=0)[:, None]).squeeze(1)
    warn_rank = tb.card_rank[warn_card.clamp(min=0)]
    warning = torch.where(hint_fit[:, 0] > 0, hint_move[:, 0], rank_hint(g, 1, warn_rank))

    my_known_playable = known & (value == NO) & (play == YES) & here & (card >= 0)
    newest = ob.hands[:, 1:].gather(2, (ob.present[:, 1:].long().sum(-1) - 1).clamp(min=0)[..., None])[..., 0]
    copies = (newest[:, None, :] == card[:, :, None]).sum(-1)  # [R, H]: partners whose newest card it is
    ok = my_known_playable & (copies == 1)
    finesse = ok.long().argmax(1)
    can_finesse = (ob.hints < g.max_info_tokens) & ok.any(1)

    right = p - 1
    oldest_right = ob.hands[:, right, 0]
    full_hints = rank_hint(g, right, tb.card_rank[oldest_right.clamp(min=0)])

    # the rules in the reference's order
    order = [
        (ob.deck == 0) & can_play_low, h + play_low,
        (ob.deck == 0) & can_mystery, h + mystery,
        must_warn, warning,
        can_finesse, finesse,
        can_play_low, h + play_low,
        can_help, helpful,
        can_mystery, h + mystery,
        ob.hints == g.max_info_tokens, full_hints,
        can_junk, junk,
        old >= 0, old,
    ]
    move = last_resort
    for i in range(len(order) - 2, -1, -2):
        move = torch.where(order[i], order[i + 1], move)
    return move


def rank_hint(game: GameConfig, offset: int | torch.Tensor, rank: torch.Tensor) -> torch.Tensor:
    """Move id of a rank hint to the player `offset` seats on."""
    g = game
    return 2 * g.hand_size + (g.players - 1) * g.colors + (offset - 1) * g.ranks + rank


def color_hint(game: GameConfig, offset: int | torch.Tensor, color: torch.Tensor) -> torch.Tensor:
    g = game
    return 2 * g.hand_size + (offset - 1) * g.colors + color


def best_hints(game: GameConfig, possible: torch.Tensor, ob: _Obs, bd: _Board) -> tuple[torch.Tensor, torch.Tensor]:
    """Per partner [R, P-1]: (fitness, move) of the hint that shows them a playable card without misleading,
    the one that rules out the most identities; colours before ranks, the first on ties; fitness -1: none."""
    g, tb = game, tables(game, possible.device)
    p, h, t, c, k = g.players, g.hand_size, g.card_types, g.colors, g.ranks
    dev = possible.device
    old = possible[:, 1:]  # [R, Q, H, T]
    hands, here = ob.hands[:, 1:], ob.present[:, 1:]  # [R, Q, H]
    safe_card = hands.clamp(min=0)
    # candidate hints: colours 0..C-1 then ranks 0..K-1 -> identity masks [N, T]
    n_hint = c + k
    hint_ids = torch.arange(n_hint, device=dev)
    hint_cards = torch.where(hint_ids[:, None] < c, tb.card_color[None, :] == hint_ids[:, None],
                             tb.card_rank[None, :] == (hint_ids[:, None] - c))  # [N, T]
    match = hint_cards[:, safe_card] & here[None]  # [N, R, Q, H]
    match = match.permute(1, 2, 0, 3)  # [R, Q, N, H]
    new = torch.where(match[..., None], old[:, :, None] & hint_cards[None, None, :, None, :],
                      old[:, :, None] & ~hint_cards[None, None, :, None, :])  # [R, Q, N, H, T]
    old_play, _ = tri(old, _rows(bd.playable, 2))  # [R, Q, H]
    new_play, _ = tri(new, _rows(bd.playable, 3))  # [R, Q, N, H]
    open_ = (here & (old_play == MAYBE))[:, :, None]  # [R, Q, 1, H]
    reveals = (open_ & (new_play == YES)).any(-1)
    ambiguous = open_ & (new_play == MAYBE) & match
    newest = torch.where(ambiguous, torch.arange(h, device=dev), -1).max(-1).values  # [R, Q, N]
    really = bd.playable.gather(1, safe_card.reshape(safe_card.shape[0], -1)).reshape(hands.shape) & here
    newest_playable = really[:, :, None, :].expand(-1, -1, n_hint, -1).gather(
        3, newest.clamp(min=0)[..., None]).squeeze(-1)
    good = reveals | ((newest >= 0) & newest_playable)
    # a rank hint on the next player's discard card that could make it valuable reads as a warning
    d = next_discard(g, possible[:, 1], ob.present[:, 1], bd)
    d_card = ob.hands[:, 1].gather(1, d.clamp(min=0)[:, None]).squeeze(1)
    d_rank = tb.card_rank[d_card.clamp(min=0)]
    d_poss = possible[:, 1].gather(1, d.clamp(min=0)[:, None, None].expand(-1, 1, t)).squeeze(1)
    avoid = torch.where((d >= 0) & could_be_valuable_with_rank(g, d_poss, d_rank, bd), d_rank, -1)  # [R]
    is_avoided = torch.zeros_like(good)
    is_avoided[:, 0, c:] = hint_ids[None, c:] - c == avoid[:, None]
    exists = match.any(-1)  # the hint touches a card
    ok = good & exists & ~is_avoided
    gain = ((old.sum(-1) * here)[:, :, None] - (new.sum(-1) * here[:, :, None])).sum(-1)  # [R, Q, N]
    fit = torch.where(ok, gain, -1)
    best = fit.argmax(-1)  # first max
    fitness = fit.gather(2, best[..., None]).squeeze(-1)
    offsets = torch.arange(1, p, device=dev)[None, :]
    move = torch.where(best < c, color_hint(g, offsets, best), rank_hint(g, offsets, best - c))
    return fitness, move
