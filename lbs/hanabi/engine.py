"""The batched Hanabi rules: pure functions of (GameConfig, HanabiState) on any device.

Everything is mask arithmetic over the batch, so a step never syncs with the host (checked mode
excepted) and B games cost one set of kernel launches. Rules and move ids follow HLE exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from ..seeding import Stream, pack
from .config import DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK, GameConfig
from .rng import hash_keys, permutation_keys
from .state import HanabiState

RESHUFFLE_KEY = int(pack(Stream.RESHUFFLE, 0, 0))
"""First hashed component of every set_hand reshuffle; deals start with a game seed of another stream."""


class IllegalMoveError(ValueError):
    """A move that HLE would refuse, found in checked mode."""


_T = TypeVar("_T")
_Builder = Callable[[GameConfig, torch.device], _T]


def device_tables(build: _Builder[_T]) -> _Builder[_T]:
    """Cache build(cfg, device) per (config, device): lookup tables built once, then shared.

    Not functools.lru_cache: torch.compile does not read that cache, it traces the builder into every
    graph (tables rebuilt with host-side ops and copied to the device at each call). A plain dict is
    read by the compiler, and its tensors enter the graph as inputs."""
    store: dict[tuple[GameConfig, torch.device], _T] = {}

    def get(cfg: GameConfig, device: torch.device) -> _T:
        key = (cfg, torch.device(device))
        hit = store.get(key)
        if hit is None:
            hit = store[key] = build(*key)
        return hit

    get.__doc__, get.__name__, get.__qualname__ = build.__doc__, build.__name__, build.__qualname__
    return get


@dataclass(frozen=True)
class Tables:
    """Constant tensors derived from a GameConfig, cached per device."""

    move_type: torch.Tensor  # [M]
    move_offset: torch.Tensor  # [M] (0 for play/discard)
    move_color: torch.Tensor  # [M] (0 where not a colour hint)
    move_rank: torch.Tensor  # [M]
    instance_card: torch.Tensor  # [N] card id of each physical card, sorted by id
    instance_copy: torch.Tensor  # [N] which copy of its card id it is (0, 1, 2)
    card_counts: torch.Tensor  # [T]
    card_color: torch.Tensor  # [T]
    card_rank: torch.Tensor  # [T]
    move_info: torch.Tensor  # [M, 5] (type, slot, offset, colour, rank) per move id, -1 where not applicable
    card_features: torch.Tensor  # [T + 1, C + R] bool: colour and rank one-hot of card id - 1 (row 0: empty)
    color_keep: torch.Tensor  # [1 + 2C, C] bool: plausibility kept after a colour hint (see _hint_codes)
    rank_keep: torch.Tensor  # [1 + 2R, R] bool: the same for rank hints


@device_tables
def tables(cfg: GameConfig, device: torch.device) -> Tables:
    t = torch.tensor(cfg.move_table, dtype=torch.long)
    inst_card, inst_copy = [], []
    for card, n in enumerate(cfg.card_counts):
        inst_card += [card] * n
        inst_copy += list(range(n))
    ids = torch.arange(cfg.card_types)
    colour_of, rank_of = ids[:, None] // cfg.ranks, ids[:, None] % cfg.ranks
    feats = torch.cat([colour_of == torch.arange(cfg.colors), rank_of == torch.arange(cfg.ranks)], 1)

    def dev(x: torch.Tensor) -> torch.Tensor:
        return x.to(device)

    return Tables(
        move_type=dev(t[:, 0]),
        move_offset=dev(t[:, 2].clamp(min=0)),
        move_color=dev(t[:, 3].clamp(min=0)),
        move_rank=dev(t[:, 4].clamp(min=0)),
        instance_card=dev(torch.tensor(inst_card)),
        instance_copy=dev(torch.tensor(inst_copy)),
        card_counts=dev(torch.tensor(cfg.card_counts)),
        card_color=dev(ids // cfg.ranks),
        card_rank=dev(ids % cfg.ranks),
        move_info=dev(t),
        card_features=dev(torch.cat([torch.zeros(1, cfg.colors + cfg.ranks, dtype=torch.bool), feats])),
        color_keep=dev(_keep_table(cfg.colors)),
        rank_keep=dev(_keep_table(cfg.ranks)),
    )


def _keep_table(n: int) -> torch.Tensor:
    """[1 + 2n, n] bool. Row 0: no hint (keep all); 1+v: the card matched value v (keep only v);
    1+n+v: it did not (drop v)."""
    eye = torch.eye(n, dtype=torch.bool)
    return torch.cat([torch.ones(1, n, dtype=torch.bool), eye, ~eye])


def _device(device: torch.device | str | None) -> torch.device:
    return torch.device(device) if device is not None else torch.device("cpu")


# ---- decks ---------------------------------------------------------------------------------------
def shuffled_decks(cfg: GameConfig, seeds: torch.Tensor, episodes: torch.Tensor) -> torch.Tensor:
    """Deck orders [B, N] from (seed, episode) per game; identical on CPU and CUDA."""
    tb = tables(cfg, seeds.device)
    order = permutation_keys(cfg.num_cards, seeds, episodes).argsort(dim=-1)
    return tb.instance_card[order]


def check_decks(cfg: GameConfig, decks: torch.Tensor) -> None:
    """Raise ValueError unless every row is a permutation of the config's cards."""
    if decks.dim() != 2 or decks.shape[1] != cfg.num_cards:
        raise ValueError(f"decks must be [B, {cfg.num_cards}] for {cfg}, got {tuple(decks.shape)}")
    tb = tables(cfg, decks.device)
    counts = torch.nn.functional.one_hot(decks.long().clamp(0, cfg.card_types - 1), cfg.card_types).sum(1)
    bad = ((decks < 0) | (decks >= cfg.card_types)).any(1) | (counts != tb.card_counts).any(1)
    if bool(bad.any()):
        rows = bad.nonzero().flatten().tolist()[:8]
        raise ValueError(f"deck rows {rows} are not permutations of the cards")


# ---- reset ---------------------------------------------------------------------------------------
def initial_state(cfg: GameConfig, decks: torch.Tensor) -> HanabiState:
    """Deal from given deck orders [B, N]: player 0 gets cards 0..H-1, player 1 the next H, ..."""
    decks = decks.long()
    b, dev = decks.shape[0], decks.device
    p, h, c, r = cfg.players, cfg.hand_size, cfg.colors, cfg.ranks
    dealt = p * h
    zeros = torch.zeros(b, dtype=torch.long, device=dev)
    return HanabiState(
        deck=decks,
        deck_pos=zeros + dealt,
        hands=decks[:, :dealt].reshape(b, p, h).clone(),
        color_plausible=torch.ones(b, p, h, c, dtype=torch.bool, device=dev),
        rank_plausible=torch.ones(b, p, h, r, dtype=torch.bool, device=dev),
        color_hinted=torch.full((b, p, h), -1, dtype=torch.long, device=dev),
        rank_hinted=torch.full((b, p, h), -1, dtype=torch.long, device=dev),
        fireworks=torch.zeros(b, c, dtype=torch.long, device=dev),
        discards=torch.zeros(b, cfg.card_types, dtype=torch.long, device=dev),
        info_tokens=zeros + cfg.max_info_tokens,
        life_tokens=zeros + cfg.max_life_tokens,
        cur_player=zeros.clone(),
        turns_left=zeros + p,
        score=zeros.clone(),
        done=torch.zeros(b, dtype=torch.bool, device=dev),
        num_steps=zeros.clone(),
        last_player=zeros - 1,
        last_move=zeros - 1,
        last_card=zeros - 1,
        last_reveal=torch.zeros(b, h, dtype=torch.bool, device=dev),
        last_scored=torch.zeros(b, dtype=torch.bool, device=dev),
        last_info_gain=torch.zeros(b, dtype=torch.bool, device=dev),
    )


def reset(cfg: GameConfig, seeds: torch.Tensor, episodes: torch.Tensor | None = None) -> HanabiState:
    """New games from one seed per game (and an episode counter, so auto-reset gets fresh decks)."""
    seeds = seeds.long()
    if episodes is None:
        episodes = torch.zeros_like(seeds)
    return initial_state(cfg, shuffled_decks(cfg, seeds, episodes))


# ---- legal moves ---------------------------------------------------------------------------------
def _player_rows(cfg: GameConfig, state: HanabiState, who: torch.Tensor) -> torch.Tensor:
    """Hands of players who [B, K] -> [B, K, H] (one index_select on the flattened hands)."""
    b, k = who.shape
    rows = torch.arange(b, device=who.device)[:, None] * cfg.players + who  # [B, K]
    return state.hands.reshape(-1, cfg.hand_size).index_select(0, rows.view(-1)).view(b, k, cfg.hand_size)


def _by_offset(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    """Hands of players cur+1 .. cur+P-1: [B, P-1, H]."""
    offs = torch.arange(1, cfg.players, device=state.device)
    return _player_rows(cfg, state, (state.cur_player[:, None] + offs) % cfg.players)


def _cur_hand(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    return _player_rows(cfg, state, state.cur_player[:, None]).squeeze(1)  # [B, H]


def legal_moves(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    """[B, M] bool; all False for finished games."""
    tb = tables(cfg, state.device)
    b, c = state.batch_size, cfg.colors
    held = _cur_hand(cfg, state) >= 0  # [B, H]
    can_discard = held & (state.info_tokens < cfg.max_info_tokens)[:, None]
    others = _by_offset(cfg, state)  # [B, P-1, H]
    feats = tb.card_features.index_select(0, (others + 1).view(-1)).view(*others.shape, -1)  # [B,P-1,H,C+R]
    hintable = feats.any(2) & (state.info_tokens > 0)[:, None, None]  # [B, P-1, C+R]
    colour_hints, rank_hints = hintable[..., :c].reshape(b, -1), hintable[..., c:].reshape(b, -1)
    legal = torch.cat([can_discard, held, colour_hints, rank_hints], dim=1)
    return legal & ~state.done[:, None]


# ---- step ----------------------------------------------------------------------------------------
def step(cfg: GameConfig, state: HanabiState, moves: torch.Tensor, checked: bool = False):
    """Apply one move per game. Returns (new_state, reward [B] float, done [B] bool).

    Finished games are left unchanged (reward 0). moves are HLE move ids. With checked=True an
    illegal move raises IllegalMoveError naming the game and the move (this syncs with the host).

    Per-slot fields are rebuilt with one row gather over the flattened [B*P*H] slots: the played
    or discarded slot's successors move left and vacated slots read a fill row appended at the end
    (cheaper on CPU than masked where over [B, P, H, C], and the same kernels on CUDA).
    """
    moves = moves.long()
    if checked:
        check_moves(cfg, state, moves)
    tb = tables(cfg, state.device)
    p, h, c, r = cfg.players, cfg.hand_size, cfg.colors, cfg.ranks
    b, dev = state.batch_size, state.device
    g = b * p * h  # slots in the batch
    active = ~state.done
    info_m = tb.move_info[moves]  # [B, 5]
    kind, slot, offset, hc, hr = info_m.unbind(1)
    is_disc = (kind == DISCARD) & active
    is_play = (kind == PLAY) & active
    is_col = (kind == REVEAL_COLOR) & active
    is_rank = (kind == REVEAL_RANK) & active
    is_hint = is_col | is_rank
    is_pd = is_disc | is_play
    players = torch.arange(p, device=dev)
    bidx = torch.arange(b, device=dev)

    # -- play / discard: the card, its fate, tokens
    my_row = bidx * p + state.cur_player  # [B] row of the mover's hand in the flattened hands
    my_hand = state.hands.reshape(b * p, h).index_select(0, my_row)  # [B, H]
    card = my_hand.gather(1, slot.clamp(min=0)[:, None]).squeeze(1).clamp(min=0)
    color, rank = tb.card_color[card], tb.card_rank[card]
    on_fw = state.fireworks.gather(1, color[:, None]).squeeze(1)
    scored = is_play & (on_fw == rank)
    misplay = is_play & ~scored
    fireworks = state.fireworks.scatter_add(1, color[:, None], scored.long()[:, None])
    completed = scored & (rank == r - 1)
    info_gain = (is_disc | completed) & (state.info_tokens < cfg.max_info_tokens)
    info = state.info_tokens + info_gain.long() - is_hint.long()
    lives = state.life_tokens - misplay.long()
    discards = state.discards.scatter_add(1, card[:, None], (is_disc | misplay).long()[:, None])

    # -- remove the card, draw a new one into the first empty slot
    deck_empty = state.deck_pos >= cfg.num_cards
    draw = is_pd & ~deck_empty
    new_card = state.deck.gather(1, state.deck_pos.clamp(max=cfg.num_cards - 1)[:, None]).squeeze(1)  # [B]
    n_left = ((my_hand >= 0).sum(1) - 1)[:, None, None]  # [B, 1, 1] cards after removal
    j = torch.arange(h, device=dev)
    shift = ((players == state.cur_player[:, None]) & is_pd[:, None])[:, :, None]  # [B, P, 1]
    vacated = shift & (j >= n_left)  # [B, P, H] slots that end up empty or freshly drawn
    lands = shift & (j == n_left) & draw[:, None, None]
    src = j + (shift & (j >= slot[:, None, None])).long()  # [B, P, H] source slot (successors move left)
    rows = (bidx[:, None, None] * p + players[:, None]) * h + src.clamp(max=h - 1)
    rows = torch.where(vacated, g, rows).view(-1)  # vacated slots read the fill row
    game_of_slot = torch.arange(g, device=dev) // (p * h)  # [B*P*H]
    hand_rows = torch.where(lands.view(-1), g + 1 + game_of_slot, rows)
    fill = torch.full((1,), -1, dtype=state.hands.dtype, device=dev)
    hands = torch.cat([state.hands.reshape(-1), fill, new_card]).index_select(0, hand_rows).view(b, p, h)

    # -- hints: positive and negative knowledge for the target's cards
    target = (state.cur_player + offset.clamp(min=0)) % p
    tgt_hand = state.hands.reshape(b * p, h).index_select(0, bidx * p + target)  # [B, H]
    held = tgt_hand >= 0
    tcard = tgt_hand.clamp(min=0)
    same_colour, same_rank = tb.card_color[tcard] == hc[:, None], tb.card_rank[tcard] == hr[:, None]
    match = held & torch.where(is_col[:, None], same_colour, same_rank)
    match = match & is_hint[:, None]
    hinted = ((players == target[:, None])[:, :, None] & held[:, None, :])  # [B, P, H] slots the hint touches
    m3 = match[:, None, :]
    miss = (~match).long()  # rows of the keep tables: 0 untouched, 1 + value (matched), 1 + n + value (not)
    col_code = (1 + hc[:, None] + c * miss)[:, None, :] * (hinted & is_col[:, None, None])  # [B, P, H]
    rank_code = (1 + hr[:, None] + r * miss)[:, None, :] * (hinted & is_rank[:, None, None])
    ones_c = torch.ones(1, c, dtype=torch.bool, device=dev)
    ones_r = torch.ones(1, r, dtype=torch.bool, device=dev)
    cp = torch.cat([state.color_plausible.reshape(g, c), ones_c]).index_select(0, rows)
    cp = (cp & tb.color_keep.index_select(0, col_code.view(-1))).view(b, p, h, c)
    rp = torch.cat([state.rank_plausible.reshape(g, r), ones_r]).index_select(0, rows)
    rp = (rp & tb.rank_keep.index_select(0, rank_code.view(-1))).view(b, p, h, r)
    none = torch.full((1,), -1, dtype=state.color_hinted.dtype, device=dev)
    ch = torch.cat([state.color_hinted.reshape(-1), none]).index_select(0, rows).view(b, p, h)
    rh = torch.cat([state.rank_hinted.reshape(-1), none]).index_select(0, rows).view(b, p, h)
    ch = torch.where(hinted & m3 & is_col[:, None, None], hc[:, None, None], ch)
    rh = torch.where(hinted & m3 & is_rank[:, None, None], hr[:, None, None], rh)

    # -- turn order, end of game, score
    turns_left = state.turns_left - (deck_empty & active).long()
    fw_sum = fireworks.sum(1)
    score = torch.where((lives > 0) | (not cfg.bomb_zero), fw_sum, torch.zeros_like(fw_sum))
    done = state.done | (lives < 1) | (fw_sum >= cfg.max_score) | (turns_left <= 0)
    reward = (score - state.score).float()
    new = HanabiState(
        deck=state.deck,
        deck_pos=state.deck_pos + draw.long(),
        hands=hands,
        color_plausible=cp,
        rank_plausible=rp,
        color_hinted=ch,
        rank_hinted=rh,
        fireworks=fireworks,
        discards=discards,
        info_tokens=info,
        life_tokens=lives,
        cur_player=torch.where(active, (state.cur_player + 1) % p, state.cur_player),
        turns_left=turns_left,
        score=score,
        done=done,
        num_steps=state.num_steps + active.long(),
        last_player=torch.where(active, state.cur_player, state.last_player),
        last_move=torch.where(active, moves, state.last_move),
        last_card=torch.where(is_pd, card, torch.where(active, -1, state.last_card)),
        last_reveal=torch.where(active[:, None], match, state.last_reveal),
        last_scored=torch.where(active, scored, state.last_scored),
        last_info_gain=torch.where(active, completed & info_gain, state.last_info_gain),
    )
    return new, reward, done


def check_moves(cfg: GameConfig, state: HanabiState, moves: torch.Tensor) -> None:
    """Raise IllegalMoveError for the first active game whose move is illegal."""
    out_of_range = (moves < 0) | (moves >= cfg.num_moves)
    legal = legal_moves(cfg, state).gather(1, moves.clamp(0, cfg.num_moves - 1)[:, None]).squeeze(1)
    bad = ~state.done & (out_of_range | ~legal)
    if bool(bad.any()):
        g = int(bad.nonzero()[0, 0])
        m = int(moves[g])
        raise IllegalMoveError(
            f"game {g}: move {m} {cfg.move_name(m)} is illegal for player {int(state.cur_player[g])} "
            f"(info tokens {int(state.info_tokens[g])}, hand {state.hands[g, state.cur_player[g]].tolist()})"
        )


# ---- search support ------------------------------------------------------------------------------
def set_hand(
    cfg: GameConfig, state: HanabiState, player: torch.Tensor, cards: torch.Tensor, seeds: torch.Tensor
) -> HanabiState:
    """Give `player` [B] the hand `cards` [B, H] (-1 in the same empty slots) and a deck built from what
    that player sees: the undealt cards are the copies they cannot see minus the new hand (a multiset,
    never the true deck order), shuffled from `seeds` [B] (any int64 keys: they are hashed behind the
    RESHUFFLE_KEY of their own stream, so no deal ever shares a key with a reshuffle). Dealt positions
    hold -1: those cards are in hands, discards or fireworks, and nothing reads them. Knowledge is kept
    (the caller samples hands that agree with it). Rows whose multiset does not fit get garbage; check
    with hand_fits first."""
    tb = tables(cfg, state.device)
    b, n, t = state.batch_size, cfg.num_cards, cfg.card_types
    cards = cards.long()
    pool = unseen_counts(cfg, state, player) - card_histogram(cards, t)  # [B, T] undealt
    take = tb.instance_copy[None, :] < pool.gather(1, tb.instance_card[None, :].expand(b, -1))  # [B, N]
    keys = permutation_keys(n, torch.full_like(seeds.long(), RESHUFFLE_KEY), seeds.long())
    keys = torch.where(take, keys, torch.iinfo(torch.long).max)
    chosen = tb.instance_card[keys.argsort(dim=1)]  # [B, N] undealt cards first, shuffled
    j = torch.arange(n, device=state.device)[None, :]
    undealt = j >= state.deck_pos[:, None]
    src = (j - state.deck_pos[:, None]).clamp(min=0)
    deck = torch.where(undealt, chosen.gather(1, src), -1)
    pmask = (torch.arange(cfg.players, device=state.device)[None, :] == player[:, None])[:, :, None]
    hands = torch.where(pmask, cards[:, None, :], state.hands)
    return state.replace(deck=deck, hands=hands)


def moves_left_bound(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    """[B] an upper bound on the moves still to come in each game (0 once over), from public counts.

    While D > 0 cards are undealt, each move either plays or discards (one draw) or hints (one token).
    The D draws take D moves, and the hints before the last draw are paid by the tokens held now plus at
    most one returned by each of the first D - 1 draws' moves: at most 2D - 1 + tokens moves empty the
    deck, then the game lasts exactly `turns_left` more (one per player). Reached by a team that hints
    whenever it can and otherwise discards; search uses it to end rollouts that play to the end.
    """
    undealt = cfg.num_cards - state.deck_pos
    bound = torch.where(undealt > 0, 2 * undealt - 1 + state.info_tokens + cfg.players, state.turns_left)
    return torch.where(state.done, 0, bound)


def card_histogram(cards: torch.Tensor, t: int) -> torch.Tensor:
    """[..., K] card ids (-1 ignored) -> [..., T] copies of each card id per row."""
    cards = cards.long()
    out = torch.zeros(*cards.shape[:-1], t, dtype=torch.long, device=cards.device)
    return out.scatter_add_(-1, cards.clamp(min=0), (cards >= 0).long())


def remaining_counts(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    """Undealt copies per card id [B, T]."""
    j = torch.arange(cfg.num_cards, device=state.device)[None, :]
    undealt = torch.where(j >= state.deck_pos[:, None], state.deck, -1)
    return card_histogram(undealt, cfg.card_types)


def unseen_counts(cfg: GameConfig, state: HanabiState, player: torch.Tensor) -> torch.Tensor:
    """Copies per card id [B, T] that `player` [B] cannot see (undealt plus their own hand), computed
    from what they see: every copy minus the other players' hands, the discards and the fireworks."""
    tb = tables(cfg, state.device)
    b, p, h = state.hands.shape
    played = torch.arange(cfg.ranks, device=state.device) < state.fireworks[:, :, None]  # [B, C, R]
    others = torch.arange(p, device=state.device)[None, :, None] != player[:, None, None]  # [B, P, 1]
    seen = card_histogram(torch.where(others, state.hands, -1).reshape(b, p * h), cfg.card_types)
    return tb.card_counts[None, :] - state.discards - played.reshape(b, -1).long() - seen


def hand_fits(cfg: GameConfig, state: HanabiState, player: torch.Tensor, cards: torch.Tensor) -> torch.Tensor:
    """[B] bool: `cards` could be `player`'s hand given the cards they see (counts only)."""
    need = card_histogram(cards.long(), cfg.card_types)
    return (need <= unseen_counts(cfg, state, player)).all(1)


def random_moves(
    cfg: GameConfig, state: HanabiState, seeds: torch.Tensor, legal: torch.Tensor | None = None
) -> torch.Tensor:
    """A uniformly random legal move per game, from hashed (seed, step) counters (device-independent).

    Pass `legal` (legal_moves of this state) when it is already computed, to skip recomputing it."""
    if legal is None:
        legal = legal_moves(cfg, state)
    ids = torch.arange(cfg.num_moves, device=state.device)
    keys = hash_keys(seeds.long()[:, None], state.num_steps[:, None], ids)
    return torch.where(legal, keys, -1).argmax(1)
