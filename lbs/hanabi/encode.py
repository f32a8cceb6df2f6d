"""Observations: HLE's canonical encoding (bit for bit), its public/private split, own-hand targets
and the V0-belief variant of the card-knowledge section.

All observers of all games are encoded at once: `observers` [B, K] holds absolute player ids and
the result is [B, K, D]. Sections are named in GameConfig.layout.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .config import PLAY, REVEAL_COLOR, REVEAL_RANK, GameConfig
from .engine import tables
from .state import HanabiState


def all_observers(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    """[B, P]: every player observes."""
    return torch.arange(cfg.players, device=state.device).expand(state.batch_size, -1)


def current_observer(state: HanabiState) -> torch.Tensor:
    """[B, 1]: the player to move observes."""
    return state.cur_player[:, None]


def _relative(cfg: GameConfig, observers: torch.Tensor) -> torch.Tensor:
    """[B, K, P]: absolute id of each player seen from each observer, observer first."""
    return (observers[:, :, None] + torch.arange(cfg.players, device=observers.device)) % cfg.players


def _per_player(x: torch.Tensor, who: torch.Tensor) -> torch.Tensor:
    """x [B, P, F] per absolute player, who [B, K, Q] -> [B, K, Q*F]."""
    b, k, q = who.shape
    g = x.gather(1, who.reshape(b, k * q, 1).expand(-1, -1, x.shape[2]))
    return g.reshape(b, k, q * x.shape[2])


def _thermometer(value: torch.Tensor, size: int) -> torch.Tensor:
    """[...] counts -> [..., size] bool, the first `value` bits set."""
    return torch.arange(size, device=value.device) < value[..., None]


def knowledge_features(cfg: GameConfig, state: HanabiState, v0: bool = False) -> torch.Tensor:
    """Per absolute player [B, P, H * (T + C + R)]: plausible cards, hinted colour, hinted rank.

    v0=True replaces the plausible bits by plausibility x publicly unseen copies, normalised per card
    (the "V0 belief"); empty slots stay zero.
    """
    b, p, h = state.hands.shape
    plaus = state.color_plausible[..., :, None] & state.rank_plausible[..., None, :]  # [B, P, H, C, R]
    plaus = plaus.reshape(b, p, h, cfg.card_types)
    held = (state.hands >= 0)[..., None]
    if v0:
        tb = tables(cfg, state.device)
        played = torch.arange(cfg.ranks, device=state.device)[None, None, :] < state.fireworks[:, :, None]
        left = tb.card_counts[None, :] - state.discards - played.reshape(b, -1).long()  # [B, T]
        w = plaus.float() * left[:, None, None, :].float()
        plaus_part = w / w.sum(-1, keepdim=True).clamp(min=1e-9)
    else:
        plaus_part = plaus
    ch = F.one_hot(state.color_hinted.clamp(min=0), cfg.colors).bool() & (state.color_hinted >= 0)[..., None]
    rh = F.one_hot(state.rank_hinted.clamp(min=0), cfg.ranks).bool() & (state.rank_hinted >= 0)[..., None]
    dt = plaus_part.dtype
    per_slot = torch.cat([plaus_part, ch.to(dt), rh.to(dt)], dim=-1) * held.to(dt)
    return per_slot.reshape(b, p, -1)


def _last_action(cfg: GameConfig, state: HanabiState, observers: torch.Tensor) -> torch.Tensor:
    """[B, K, last_action_dim] bool."""
    tb = tables(cfg, state.device)
    p, h = cfg.players, cfg.hand_size
    b, k = observers.shape
    any_move = (state.last_player >= 0)[:, None]  # [B, 1]
    mv = state.last_move.clamp(min=0)
    kind = tb.move_type[mv]
    is_hint = (kind == REVEAL_COLOR) | (kind == REVEAL_RANK)
    is_pd = ~is_hint
    actor = (state.last_player[:, None] - observers) % p  # [B, K]
    target = (actor + tb.move_offset[mv][:, None]) % p
    order = tb.hle_type_order[kind]
    card = state.last_card.clamp(min=0)

    def oh(x: torch.Tensor, n: int, on: torch.Tensor) -> torch.Tensor:
        return F.one_hot(x, n).bool() & on[..., None]

    shared = torch.cat(
        [
            oh(order, 4, torch.ones_like(is_hint)),
            # target goes here (observer-relative), inserted below
            oh(tb.move_color[mv], cfg.colors, kind == REVEAL_COLOR),
            oh(tb.move_rank[mv], cfg.ranks, kind == REVEAL_RANK),
            state.last_reveal & is_hint[:, None],
            oh(tb.move_slot[mv], h, is_pd),
            oh(card, cfg.card_types, is_pd),
            (state.last_scored & (kind == PLAY))[:, None],
            (state.last_info_gain & (kind == PLAY))[:, None],
        ],
        dim=1,
    )  # [B, 4 + rest]
    shared = shared[:, None, :].expand(b, k, -1)
    out = torch.cat(
        [oh(actor, p, torch.ones_like(actor, dtype=torch.bool)), shared[..., :4],
         oh(target, p, is_hint[:, None].expand(b, k)), shared[..., 4:]],
        dim=2,
    )
    return out & any_move[:, :, None]


def encode(
    cfg: GameConfig,
    state: HanabiState,
    observers: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    v0_belief: bool = False,
) -> torch.Tensor:
    """Canonical observation [B, K, obs_dim] for observers [B, K] (default: every player).

    Equal to HLE's CANONICAL encoder for each observer. v0_belief swaps the plausible-card bits of
    the knowledge section for the V0 belief (needs a floating dtype).
    """
    if observers is None:
        observers = all_observers(cfg, state)
    b, k = observers.shape
    p, h = cfg.players, cfg.hand_size
    rel = _relative(cfg, observers)  # [B, K, P]
    # hands: other players' cards one-hot, then the missing-card bit per player (observer first)
    hand_oh = F.one_hot(state.hands.clamp(min=0), cfg.card_types).bool() & (state.hands >= 0)[..., None]
    cards = _per_player(hand_oh.reshape(b, p, -1), rel[:, :, 1:])
    missing = ((state.hands >= 0).sum(2) < h)[:, :, None]  # [B, P, 1]
    missing = _per_player(missing, rel)
    # board and discards are the same for every observer
    played = torch.arange(cfg.ranks, device=state.device) == (state.fireworks - 1)[..., None]  # [B, C, R]
    tb = tables(cfg, state.device)
    common = torch.cat(
        [
            _thermometer(cfg.num_cards - state.deck_pos, cfg.max_deck_after_deal),
            played.reshape(b, -1),
            _thermometer(state.info_tokens, cfg.max_info_tokens),
            _thermometer(state.life_tokens, cfg.max_life_tokens),
            state.discards[:, tb.instance_card] > tb.instance_copy,  # thermometer per card id
        ],
        dim=1,
    )
    know = _per_player(knowledge_features(cfg, state, v0=v0_belief), rel)
    parts = [cards, missing, common[:, None, :].expand(b, k, -1), _last_action(cfg, state, observers), know]
    return torch.cat([x.to(dtype) for x in parts], dim=2)


def public_features(cfg: GameConfig, obs: torch.Tensor) -> torch.Tensor:
    """Drop the other players' card identities: [..., public_dim] (input of the public LSTM)."""
    return obs[..., cfg.layout.slices["hands.cards"].stop :]


def own_hands(cfg: GameConfig, state: HanabiState, observers: torch.Tensor | None = None) -> torch.Tensor:
    """Each observer's own cards [B, K, H] as class targets (card id, -1 for an empty slot)."""
    if observers is None:
        observers = all_observers(cfg, state)
    idx = observers[:, :, None].expand(-1, -1, cfg.hand_size)
    return state.hands.gather(1, idx)
