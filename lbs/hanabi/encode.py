"""Observations: HLE's canonical encoding (bit for bit), its public/private split, own-hand targets
and the V0-belief variant of the card-knowledge section.

All observers of all games are encoded at once: `observers` [B, K] holds absolute player ids and
the result is [B, K, D]. Sections are named in GameConfig.layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import LAST_ACTION_TYPE_ORDER, PLAY, REVEAL_COLOR, REVEAL_RANK, GameConfig
from .engine import device_tables, tables
from .state import HanabiState


def all_observers(cfg: GameConfig, state: HanabiState) -> torch.Tensor:
    """[B, P]: every player observes."""
    return torch.arange(cfg.players, device=state.device).expand(state.batch_size, -1)


def current_observer(state: HanabiState) -> torch.Tensor:
    """[B, 1]: the player to move observes."""
    return state.cur_player[:, None]


# ---- lookup tables: every per-slot / per-move pattern is one row, so a section is one index_select ----
@dataclass(frozen=True)
class _EncodeTables:
    card: torch.Tensor  # [T + 1, T] bool: row id+1 is the one-hot of card id (row 0: empty slot)
    knowledge: torch.Tensor  # [rows, T + C + R] bool: slot knowledge per _knowledge_codes (last row: empty)
    plaus_weights: torch.Tensor  # [C + R, 2] float: colour / rank plausibility bits -> two bit masks
    last_move: torch.Tensor  # [M + 1, last_action size] bool: bits fixed by the last move id (row 0: none)
    player: torch.Tensor  # [P + 1, P] bool: row i+1 is the one-hot of relative player i (row 0: none)


@device_tables
def _encode_tables(cfg: GameConfig, device: torch.device) -> _EncodeTables:
    c, r, t, p = cfg.colors, cfg.ranks, cfg.card_types, cfg.players
    eye = torch.eye(max(t, p) + 1, dtype=torch.bool)
    # knowledge: code = ((colour_mask * 2^R + rank_mask) * (C+1) + hinted_colour+1) * (R+1) + hinted_rank+1
    code = torch.arange((1 << (c + r)) * (c + 1) * (r + 1))
    hr, hc, masks = code % (r + 1) - 1, code // (r + 1) % (c + 1) - 1, code // ((r + 1) * (c + 1))
    cbits = (masks[:, None] >> (r + torch.arange(c))) & 1  # [rows, C]
    rbits = (masks[:, None] >> torch.arange(r)) & 1  # [rows, R]
    plaus = (cbits[:, :, None] & rbits[:, None, :]).reshape(-1, t).bool()
    know = torch.cat([plaus, hc[:, None] == torch.arange(c), hr[:, None] == torch.arange(r)], dim=1)
    know = torch.cat([know, torch.zeros(1, t + c + r, dtype=torch.bool)])  # empty slot
    weights = torch.zeros(c + r, 2)
    weights[:c, 0] = 2.0 ** torch.arange(c)  # small powers of two: exact even in reduced-precision matmul
    weights[c:, 1] = 2.0 ** torch.arange(r)
    # last action bits fixed by the move id: type, hinted colour / rank, played or discarded slot
    la = torch.zeros(cfg.num_moves + 1, _last_action(cfg, "").stop, dtype=torch.bool)
    for m, (kind, slot, _off, colour, rank) in enumerate(cfg.move_table):
        la[m + 1, _last_action(cfg, "type").start + LAST_ACTION_TYPE_ORDER.index(kind)] = True
        if kind == REVEAL_COLOR:
            la[m + 1, _last_action(cfg, "color").start + colour] = True
        elif kind == REVEAL_RANK:
            la[m + 1, _last_action(cfg, "rank").start + rank] = True
        else:
            la[m + 1, _last_action(cfg, "slot").start + slot] = True
    return _EncodeTables(
        card=eye[: t + 1, 1 : t + 1].contiguous().to(device),
        knowledge=know.to(device),
        plaus_weights=weights.to(device),
        last_move=la.to(device),
        player=eye[: p + 1, 1 : p + 1].contiguous().to(device),
    )


def _last_action(cfg: GameConfig, part: str) -> slice:
    """A part of the last-action section, relative to the section's start ('' for the whole)."""
    lay = cfg.layout.slices
    la, sl = lay["last_action"].start, lay[f"last_action.{part}" if part else "last_action"]
    return slice(sl.start - la, sl.stop - la)


def _from_bool(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x.to(dtype) for bool x, exactly. Eager goes through a uint8 view (several times faster on CPU);
    under torch.compile the plain conversion, since Inductor before torch 2.12 cannot lower a bitcast
    of bool (`torch.iinfo(torch.bool)` raises in its view.dtype lowering)."""
    if torch.compiler.is_compiling():
        return x.to(dtype)
    return x.view(torch.uint8).to(dtype)


def _lookup(table: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """table[rows] for rows [...] -> [..., W] (index_select: one contiguous copy per row)."""
    return table.index_select(0, rows.reshape(-1)).reshape(*rows.shape, table.shape[1])


def _knowledge_codes(cfg: GameConfig, state: HanabiState, et: _EncodeTables) -> torch.Tensor:
    """[B, P, H] row of the knowledge table for each slot."""
    c, r = cfg.colors, cfg.ranks
    bits = torch.cat([state.color_plausible, state.rank_plausible], dim=-1)  # [B, P, H, C+R]
    masks = (_from_bool(bits, torch.float32) @ et.plaus_weights).long()  # [B, P, H, 2]
    code = ((masks[..., 0] << r) + masks[..., 1]) * (c + 1) + state.color_hinted + 1
    code = code * (r + 1) + state.rank_hinted + 1
    return torch.where(state.hands >= 0, code, et.knowledge.shape[0] - 1)


def _relative(cfg: GameConfig, observers: torch.Tensor) -> torch.Tensor:
    """[B, K, P]: absolute id of each player seen from each observer, observer first."""
    return (observers[:, :, None] + torch.arange(cfg.players, device=observers.device)) % cfg.players


def _per_player(x: torch.Tensor, who: torch.Tensor) -> torch.Tensor:
    """x [B, P, F] per absolute player, who [B, K, Q] -> [B, K, Q*F]."""
    b, k, q = who.shape
    g = x.gather(1, who.reshape(b, k * q, 1).expand(-1, -1, x.shape[2]))
    return g.reshape(b, k, q * x.shape[2])


def _rotations(x: torch.Tensor, first: int, count: int) -> torch.Tensor:
    """x [B, P, F] -> [B, P, count*F]: row k holds players k+first .. k+first+count-1 (mod P).

    The fast path for "every player observes": a strided view of x repeated twice along the
    player axis, so the only copy is the one into the output buffer.
    """
    b, p, f = x.shape
    x2 = torch.cat([x, x], dim=1)  # [B, 2P, F], a fresh tensor: contiguous, storage offset 0
    return x2.as_strided((b, p, count * f), (2 * p * f, f, 1), first * f)  # no host-side read of x2


def _thermometer(value: torch.Tensor, size: int) -> torch.Tensor:
    """[...] counts -> [..., size] bool, the first `value` bits set."""
    return torch.arange(size, device=value.device) < value[..., None]


def knowledge_features(cfg: GameConfig, state: HanabiState, v0: bool = False) -> torch.Tensor:
    """Per absolute player [B, P, H * (T + C + R)]: plausible cards, hinted colour, hinted rank.

    v0=True replaces the plausible bits by plausibility x publicly unseen copies, normalised per card
    (the "V0 belief"), as float; empty slots stay zero. Without v0 the result is bool.
    """
    b, p, h = state.hands.shape
    et = _encode_tables(cfg, state.device)
    per_slot = _lookup(et.knowledge, _knowledge_codes(cfg, state, et))  # [B, P, H, T+C+R] bool
    if v0:
        tb = tables(cfg, state.device)
        t = cfg.card_types
        played = torch.arange(cfg.ranks, device=state.device)[None, None, :] < state.fireworks[:, :, None]
        left = tb.card_counts[None, :] - state.discards - played.reshape(b, -1).long()  # [B, T]
        w = per_slot[..., :t].float() * left[:, None, None, :].float()
        plaus = w / w.sum(-1, keepdim=True).clamp(min=1e-9)
        per_slot = torch.cat([plaus, per_slot[..., t:].float()], dim=-1)
    return per_slot.reshape(b, p, -1)


def encode(
    cfg: GameConfig,
    state: HanabiState,
    observers: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    v0_belief: bool = False,
) -> torch.Tensor:
    """Canonical observation [B, K, obs_dim] for observers [B, K] (default: every player).

    Equal to HLE's CANONICAL encoder for each observer. v0_belief swaps the plausible-card bits of
    the knowledge section for the V0 belief (needs a floating dtype). Sections are table lookups
    written into one bool buffer, converted to `dtype` in a single pass (bool -> uint8 -> dtype is
    several times faster than converting bool pieces one by one on CPU).
    """
    every = observers is None  # every player observes: per-player sections are rotations
    if observers is None:
        observers = all_observers(cfg, state)
    b, k = observers.shape
    p = cfg.players
    tb, et = tables(cfg, state.device), _encode_tables(cfg, state.device)
    lay = cfg.layout.slices
    buf = torch.empty(b, k, cfg.obs_dim, dtype=torch.bool, device=state.device)

    def put(name: str, x: torch.Tensor) -> None:
        buf[:, :, lay[name]].copy_(x)  # x broadcasts to [B, K, size]

    if every:
        def seen(x: torch.Tensor, first: int, count: int) -> torch.Tensor:
            return _rotations(x, first, count)
    else:
        rel = _relative(cfg, observers)  # [B, K, P]

        def seen(x: torch.Tensor, first: int, count: int) -> torch.Tensor:
            return _per_player(x, rel[:, :, first : first + count])

    # hands: other players' cards one-hot, then the missing-card bit per player (observer first)
    put("hands.cards", seen(_lookup(et.card, state.hands + 1).reshape(b, p, -1), 1, p - 1))
    put("hands.missing", seen((state.hands < 0).any(2, keepdim=True), 0, p))
    # board and discards are the same for every observer: one [B, F] row, broadcast once
    played = torch.arange(cfg.ranks, device=state.device) == (state.fireworks - 1)[..., None]  # [B, C, R]
    board = torch.cat(
        [
            _thermometer(cfg.num_cards - state.deck_pos, cfg.max_deck_after_deal),
            played.reshape(b, -1),
            _thermometer(state.info_tokens, cfg.max_info_tokens),
            _thermometer(state.life_tokens, cfg.max_life_tokens),
            state.discards.index_select(1, tb.instance_card) > tb.instance_copy,  # thermometer per card id
        ],
        dim=1,
    )
    buf[:, :, lay["board.deck"].start : lay["discards"].stop].copy_(board[:, None])
    # last action: bits fixed by the move id and the outcome (shared), then observer-relative actor/target
    shared = _lookup(et.last_move, state.last_move + 1)  # [B, last_action size]
    kind = tb.move_type[state.last_move.clamp(min=0)]
    is_play = (kind == PLAY) & (state.last_move >= 0)
    is_hint = (kind == REVEAL_COLOR) | (kind == REVEAL_RANK)
    shared[:, _last_action(cfg, "reveal")] = state.last_reveal & is_hint[:, None]
    card = torch.where(is_hint | (state.last_move < 0), -1, state.last_card)
    shared[:, _last_action(cfg, "card")] = _lookup(et.card, card + 1)
    shared[:, _last_action(cfg, "scored")] = (state.last_scored & is_play)[:, None]
    shared[:, _last_action(cfg, "info_gain")] = (state.last_info_gain & is_play)[:, None]
    put("last_action", shared[:, None])
    moved = state.last_player >= 0
    actor = torch.where(moved[:, None], (state.last_player[:, None] - observers) % p, -1)  # [B, K]
    offset = tb.move_offset[state.last_move.clamp(min=0)]
    target = torch.where((moved & is_hint)[:, None], (actor + offset[:, None]) % p, -1)
    put("last_action.actor", _lookup(et.player, actor + 1))
    put("last_action.target", _lookup(et.player, target + 1))
    # card knowledge per player, observer first
    put("knowledge", seen(knowledge_features(cfg, state).reshape(b, p, -1), 0, p))
    out = buf if dtype == torch.bool else _from_bool(buf, dtype)
    if v0_belief:
        out[:, :, lay["knowledge"]] = seen(knowledge_features(cfg, state, v0=True), 0, p).to(dtype)
    return out


def public_features(cfg: GameConfig, obs: torch.Tensor) -> torch.Tensor:
    """Drop the other players' card identities: [..., public_dim] (input of the public LSTM)."""
    return obs[..., cfg.layout.slices["hands.cards"].stop :]


def own_hand_facts(cfg: GameConfig, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What a canonical observation [..., obs_dim] alone says about the observer's own hand:
    (copies of each card id the observer cannot see [..., T] long, cards the hints allow in each own
    slot [..., H, T] bool, all False for an empty slot).

    Unseen = all copies - discards - fireworks - the other players' cards. Models and search only
    hold observations, so they read public facts from them rather than from a state.
    """
    if obs.shape[-1] != cfg.obs_dim:
        raise ValueError(f"obs must be [..., obs_dim={cfg.obs_dim}], got {tuple(obs.shape)}")
    lay, tb = cfg.layout, tables(cfg, obs.device)
    lead, t, c, r, h = obs.shape[:-1], cfg.card_types, cfg.colors, cfg.ranks, cfg.hand_size
    x = obs != 0
    others = lay.view(x, "hands.cards").reshape(*lead, -1, t).long().sum(-2)  # [..., T]
    top = lay.view(x, "board.fireworks").reshape(*lead, c, r).long()  # one-hot of the top card per colour
    played = top.flip(-1).cumsum(-1).flip(-1).reshape(*lead, t)  # rank r is played iff the top is >= r
    discarded = torch.zeros(*lead, t, dtype=torch.long, device=obs.device)
    discarded.index_add_(-1, tb.instance_card, lay.view(x, "discards").long())  # thermometer per card
    plaus = lay.view(x, "knowledge")[..., : h * (t + c + r)].reshape(*lead, h, t + c + r)[..., :t]
    return tb.card_counts - discarded - played - others, plaus


def own_hands(cfg: GameConfig, state: HanabiState, observers: torch.Tensor | None = None) -> torch.Tensor:
    """Each observer's own cards [B, K, H] as class targets (card id, -1 for an empty slot)."""
    if observers is None:
        observers = all_observers(cfg, state)
    idx = observers[:, :, None].expand(-1, -1, cfg.hand_size)
    return state.hands.gather(1, idx)
