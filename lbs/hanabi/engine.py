"""The batched Hanabi rules: pure functions of (GameConfig, HanabiState) on any device.

Everything is mask arithmetic over the batch, so a step never syncs with the host (checked mode
excepted) and B games cost one set of kernel launches. Rules and move ids follow HLE exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from .config import DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK, GameConfig
from .rng import hash_keys, permutation_keys
from .state import HanabiState


class IllegalMoveError(ValueError):
    """A move that HLE would refuse, found in checked mode."""


@dataclass(frozen=True)
class Tables:
    """Constant tensors derived from a GameConfig, cached per device."""

    move_type: torch.Tensor  # [M]
    move_slot: torch.Tensor  # [M] (0 for hints, masked by type)
    move_offset: torch.Tensor  # [M] (0 for play/discard)
    move_color: torch.Tensor  # [M] (0 where not a colour hint)
    move_rank: torch.Tensor  # [M]
    instance_card: torch.Tensor  # [N] card id of each physical card, sorted by id
    instance_copy: torch.Tensor  # [N] which copy of its card id it is (0, 1, 2)
    card_counts: torch.Tensor  # [T]
    card_color: torch.Tensor  # [T]
    card_rank: torch.Tensor  # [T]
    hle_type_order: torch.Tensor  # [4] our move type -> HLE's last-action order (play, discard, colour, rank)


@lru_cache(maxsize=64)
def tables(cfg: GameConfig, device: torch.device) -> Tables:
    t = torch.tensor(cfg.move_table, dtype=torch.long)
    inst_card, inst_copy = [], []
    for card, n in enumerate(cfg.card_counts):
        inst_card += [card] * n
        inst_copy += list(range(n))
    ids = torch.arange(cfg.card_types)

    def dev(x: torch.Tensor) -> torch.Tensor:
        return x.to(device)

    return Tables(
        move_type=dev(t[:, 0]),
        move_slot=dev(t[:, 1].clamp(min=0)),
        move_offset=dev(t[:, 2].clamp(min=0)),
        move_color=dev(t[:, 3].clamp(min=0)),
        move_rank=dev(t[:, 4].clamp(min=0)),
        instance_card=dev(torch.tensor(inst_card)),
        instance_copy=dev(torch.tensor(inst_copy)),
        card_counts=dev(torch.tensor(cfg.card_counts)),
        card_color=dev(ids // cfg.ranks),
        card_rank=dev(ids % cfg.ranks),
        hle_type_order=dev(torch.tensor([1, 0, 2, 3])),
    )


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
        raise ValueError(f"deck rows {bad.nonzero().flatten().tolist()[:8]} are not permutations of the cards")


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
def _by_offset(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    """Hands of players cur+1 .. cur+P-1: [B, P-1, H]."""
    p = cfg.players
    offs = torch.arange(1, p, device=state.device)
    who = (state.cur_player[:, None] + offs) % p  # [B, P-1]
    return state.hands.gather(1, who[:, :, None].expand(-1, -1, cfg.hand_size))


def _cur_hand(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    idx = state.cur_player[:, None, None].expand(-1, 1, cfg.hand_size)
    return state.hands.gather(1, idx).squeeze(1)  # [B, H]


def legal_moves(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    """[B, M] bool; all False for finished games."""
    tb = tables(cfg, state.device)
    held = _cur_hand(cfg, state) >= 0  # [B, H]
    can_discard = held & (state.info_tokens < cfg.max_info_tokens)[:, None]
    others = _by_offset(cfg, state)  # [B, P-1, H]
    valid = others >= 0
    card = others.clamp(min=0)
    col = torch.nn.functional.one_hot(tb.card_color[card], cfg.colors).bool() & valid[..., None]
    rnk = torch.nn.functional.one_hot(tb.card_rank[card], cfg.ranks).bool() & valid[..., None]
    can_hint = (state.info_tokens > 0)[:, None]
    b = state.batch_size
    legal = torch.cat(
        [can_discard, held, col.any(2).reshape(b, -1) & can_hint, rnk.any(2).reshape(b, -1) & can_hint], dim=1
    )
    return legal & ~state.done[:, None]


# ---- step ----------------------------------------------------------------------------------------
def _shift_out(x: torch.Tensor, slot: torch.Tensor, fill) -> torch.Tensor:
    """Remove slot from the hand axis (dim 2) of x [B, P, H, ...]; later slots move left, fill last."""
    b, p, h = x.shape[:3]
    j = torch.arange(h, device=x.device)
    src = (j + (j >= slot[:, None]).long())  # [B, H] in 0..H
    pad = torch.full_like(x[:, :, :1], fill)
    xp = torch.cat([x, pad], dim=2)
    idx = src.view(b, 1, h, *([1] * (x.dim() - 3))).expand(b, p, h, *x.shape[3:])
    return xp.gather(2, idx)


def step(cfg: GameConfig, state: HanabiState, moves: torch.Tensor, checked: bool = False):
    """Apply one move per game. Returns (new_state, reward [B] float, done [B] bool).

    Finished games are left unchanged (reward 0). moves are HLE move ids. With checked=True an
    illegal move raises IllegalMoveError naming the game and the move (this syncs with the host).
    """
    moves = moves.long()
    if checked:
        check_moves(cfg, state, moves)
    tb = tables(cfg, state.device)
    p, h, c, r = cfg.players, cfg.hand_size, cfg.colors, cfg.ranks
    b, dev = state.batch_size, state.device
    active = ~state.done
    kind = tb.move_type[moves]
    is_disc = (kind == DISCARD) & active
    is_play = (kind == PLAY) & active
    is_col = (kind == REVEAL_COLOR) & active
    is_rank = (kind == REVEAL_RANK) & active
    is_hint = is_col | is_rank
    is_pd = is_disc | is_play
    slot = tb.move_slot[moves]
    players = torch.arange(p, device=dev)
    cur_mask = players[None, :] == state.cur_player[:, None]  # [B, P]

    # -- play / discard: the card, its fate, tokens
    my_hand = _cur_hand(cfg, state)
    card = my_hand.gather(1, slot[:, None]).squeeze(1).clamp(min=0)
    color, rank = tb.card_color[card], tb.card_rank[card]
    on_fw = state.fireworks.gather(1, color[:, None]).squeeze(1)
    scored = is_play & (on_fw == rank)
    misplay = is_play & ~scored
    fireworks = state.fireworks + torch.nn.functional.one_hot(color, c) * scored[:, None]
    completed = scored & (rank == r - 1)
    info_gain = (is_disc | completed) & (state.info_tokens < cfg.max_info_tokens)
    info = state.info_tokens + info_gain.long() - is_hint.long()
    lives = state.life_tokens - misplay.long()
    discards = state.discards + torch.nn.functional.one_hot(card, cfg.card_types) * (is_disc | misplay)[:, None]

    # -- remove the card, draw a new one into the first empty slot
    deck_empty = state.deck_pos >= cfg.num_cards
    draw = is_pd & ~deck_empty
    new_card = state.deck.gather(1, state.deck_pos.clamp(max=cfg.num_cards - 1)[:, None])  # [B, 1]
    n_left = (my_hand >= 0).sum(1) - 1  # cards after removal
    lands = (torch.arange(h, device=dev)[None, :] == n_left[:, None]) & draw[:, None]  # [B, H]
    shift = (cur_mask & is_pd[:, None])[:, :, None]  # [B, P, 1]
    hands = torch.where(shift, _shift_out(state.hands, slot, -1), state.hands)
    hands = torch.where(shift & lands[:, None, :], new_card[:, :, None], hands)
    cp = torch.where(shift[..., None], _shift_out(state.color_plausible, slot, True), state.color_plausible)
    rp = torch.where(shift[..., None], _shift_out(state.rank_plausible, slot, True), state.rank_plausible)
    ch = torch.where(shift, _shift_out(state.color_hinted, slot, -1), state.color_hinted)
    rh = torch.where(shift, _shift_out(state.rank_hinted, slot, -1), state.rank_hinted)
    # A drawn card is fresh (all plausible, nothing hinted) even if a hand was not full before.
    fresh = (shift & lands[:, None, :])  # [B, P, H]
    cp = cp | fresh[..., None]
    rp = rp | fresh[..., None]
    ch = torch.where(fresh, -1, ch)
    rh = torch.where(fresh, -1, rh)

    # -- hints: positive and negative knowledge for the target's cards
    target = (state.cur_player + tb.move_offset[moves]) % p
    tgt_hand = state.hands.gather(1, target[:, None, None].expand(-1, 1, h)).squeeze(1)  # [B, H]
    held = tgt_hand >= 0
    hc, hr = tb.move_color[moves], tb.move_rank[moves]
    tcard = tgt_hand.clamp(min=0)
    match = held & torch.where(is_col[:, None], tb.card_color[tcard] == hc[:, None], tb.card_rank[tcard] == hr[:, None])
    match = match & is_hint[:, None]
    tgt_mask = (players[None, :] == target[:, None])[:, :, None] & held[:, None, :]  # [B, P, H]
    col_oh = torch.nn.functional.one_hot(hc, c).bool()[:, None, None, :]  # [B, 1, 1, C]
    rank_oh = torch.nn.functional.one_hot(hr, r).bool()[:, None, None, :]
    m4 = match[:, None, :, None]
    upd_c = (tgt_mask & is_col[:, None, None])[..., None]
    upd_r = (tgt_mask & is_rank[:, None, None])[..., None]
    cp = torch.where(upd_c, torch.where(m4, col_oh, cp & ~col_oh), cp)
    rp = torch.where(upd_r, torch.where(m4, rank_oh, rp & ~rank_oh), rp)
    ch = torch.where(upd_c[..., 0] & match[:, None, :], hc[:, None, None], ch)
    rh = torch.where(upd_r[..., 0] & match[:, None, :], hr[:, None, None], rh)

    # -- turn order, end of game, score
    turns_left = state.turns_left - (deck_empty & active).long()
    fw_sum = fireworks.sum(1)
    score = torch.where((lives > 0) | (not cfg.bomb_zero), fw_sum, torch.zeros_like(fw_sum))
    done = state.done | (lives < 1) | (fw_sum >= cfg.max_score) | (turns_left <= 0)
    reward = (score - state.score).float()
    keep = active[:, None]
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
        last_reveal=torch.where(keep, match, state.last_reveal),
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
    """Give `player` [B] the hand `cards` [B, H] (-1 in the same empty slots) and keep the deck
    consistent: the old hand goes back into the undealt cards, the new one comes out, and the
    undealt part is reshuffled from `seeds` [B]. Knowledge is kept (the caller samples hands that
    agree with it). Rows whose multiset does not fit get garbage; check with hand_fits first."""
    tb = tables(cfg, state.device)
    b, n, t = state.batch_size, cfg.num_cards, cfg.card_types
    cards = cards.long()
    old = state.hands.gather(1, player[:, None, None].expand(-1, 1, cfg.hand_size)).squeeze(1)
    pool = remaining_counts(cfg, state) + _counts(old, t) - _counts(cards, t)  # [B, T] undealt after swap
    take = tb.instance_copy[None, :] < pool.gather(1, tb.instance_card[None, :].expand(b, -1))  # [B, N]
    keys = permutation_keys(n, seeds.long(), torch.full_like(seeds.long(), -7))
    keys = torch.where(take, keys, torch.iinfo(torch.long).max)
    chosen = tb.instance_card[keys.argsort(dim=1)]  # [B, N] undealt cards first, shuffled
    j = torch.arange(n, device=state.device)[None, :]
    undealt = j >= state.deck_pos[:, None]
    src = (j - state.deck_pos[:, None]).clamp(min=0)
    deck = torch.where(undealt, chosen.gather(1, src), state.deck)
    pmask = (torch.arange(cfg.players, device=state.device)[None, :] == player[:, None])[:, :, None]
    hands = torch.where(pmask, cards[:, None, :], state.hands)
    return state.replace(deck=deck, hands=hands)


def _counts(cards: torch.Tensor, t: int) -> torch.Tensor:
    """[B, K] card ids (-1 ignored) -> [B, T] counts."""
    valid = (cards >= 0).long()
    out = torch.zeros(cards.shape[0], t, dtype=torch.long, device=cards.device)
    return out.scatter_add_(1, cards.clamp(min=0), valid)


def remaining_counts(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    """Undealt copies per card id [B, T]."""
    j = torch.arange(cfg.num_cards, device=state.device)[None, :]
    undealt = torch.where(j >= state.deck_pos[:, None], state.deck, -1)
    return _counts(undealt, cfg.card_types)


def unseen_counts(cfg: GameConfig, state: HanabiState, player: torch.Tensor) -> torch.Tensor:
    """Copies per card id [B, T] that `player` [B] cannot see: undealt plus their own hand."""
    own = state.hands.gather(1, player[:, None, None].expand(-1, 1, cfg.hand_size)).squeeze(1)
    return remaining_counts(cfg, state) + _counts(own, cfg.card_types)


def hand_fits(cfg: GameConfig, state: HanabiState, player: torch.Tensor, cards: torch.Tensor) -> torch.Tensor:
    """[B] bool: `cards` could be `player`'s hand given the cards they see (counts only)."""
    need = _counts(cards.long(), cfg.card_types)
    return (need <= unseen_counts(cfg, state, player)).all(1)


def random_moves(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
    """A uniformly random legal move per game, from hashed (seed, step) counters (device-independent)."""
    legal = legal_moves(cfg, state)
    keys = hash_keys(seeds.long()[:, None], state.num_steps[:, None], torch.arange(cfg.num_moves, device=state.device))
    return torch.where(legal, keys, -1).argmax(1)
