"""Colour permutations (the "other-play" colour shuffle) for states, moves and observations.

Hanabi's rules are symmetric in the colours (every colour has the same card counts), so relabelling
them maps a game to an equally valid game. A permutation perm [B, C] sends colour c to perm[b, c]
in game b. The invariants the tests check: encoding a permuted state equals permuting the features
of the original encoding, legal moves permute the same way, and stepping commutes with permuting.
"""

from __future__ import annotations

import torch

from .config import REVEAL_COLOR, GameConfig
from .engine import device_tables, tables
from .rng import permutation_keys
from .state import HanabiState

_PERM_SALT = 0x5EED_C010  # separates colour-shuffle keys from deck-shuffle keys with the same counters


def random_perms(cfg: GameConfig, *keys: torch.Tensor) -> torch.Tensor:
    """Uniform colour permutations [B, C] from hashed keys (e.g. game seed, seat, episode), each [B];
    the same on CPU and CUDA."""
    keys = tuple(k.long() for k in keys)
    salt = torch.full_like(keys[0], _PERM_SALT)
    return permutation_keys(cfg.colors, *keys, salt).argsort(dim=-1)


def identity_perms(cfg: GameConfig, batch_size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[B, C] permutations that change nothing."""
    return torch.arange(cfg.colors, device=device).expand(batch_size, -1).clone()


def inverse_perms(perm: torch.Tensor) -> torch.Tensor:
    """inv[b, perm[b, c]] = c."""
    return perm.argsort(dim=-1)


def check_perms(cfg: GameConfig, perm: torch.Tensor) -> None:
    """Raise ValueError unless perm is [B, C] with every row a permutation of the colours."""
    if perm.dim() != 2 or perm.shape[1] != cfg.colors:
        raise ValueError(f"perm must be [B, {cfg.colors}], got {tuple(perm.shape)}")
    ok = (perm.sort(dim=1).values == torch.arange(cfg.colors, device=perm.device)).all(1)
    if not bool(ok.all()):
        raise ValueError(f"perm rows {(~ok).nonzero().flatten().tolist()[:8]} are not colour permutations")


# ---- cards ---------------------------------------------------------------------------------------
def card_permutation(cfg: GameConfig, perm: torch.Tensor) -> torch.Tensor:
    """[B, T]: new card id of each card id (colour c, rank r) -> (perm[c], r)."""
    tb = tables(cfg, perm.device)
    return perm.long()[:, tb.card_color] * cfg.ranks + tb.card_rank  # [B, T]


def permute_cards(cfg: GameConfig, cards: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Card ids [B, ...] in the original colours -> ids in the permuted game (-1 stays -1)."""
    return _map_ids(card_permutation(cfg, perm), cards)


def _map_ids(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Apply a per-game id map table [B, n] to ids [B, ...] (-1 stays -1)."""
    b = ids.shape[0]
    flat = ids.reshape(b, -1)
    out = table.gather(1, flat.clamp(min=0).long())
    return torch.where(flat >= 0, out, flat).reshape(ids.shape).to(ids.dtype)


def _move_colour_axis(x: torch.Tensor, inv: torch.Tensor, axis: int) -> torch.Tensor:
    """new[..., perm[c], ...] = x[..., c, ...] along `axis`, i.e. new[j] = x[inv[j]]."""
    shape = [1] * x.dim()
    shape[0], shape[axis] = x.shape[0], x.shape[axis]
    return x.gather(axis, inv.view(shape).expand(x.shape))


# ---- moves ---------------------------------------------------------------------------------------
def move_permutation(cfg: GameConfig, perm: torch.Tensor) -> torch.Tensor:
    """[B, M]: new move id of each move id (only colour hints change)."""
    tb = tables(cfg, perm.device)
    ids = torch.arange(cfg.num_moves, device=perm.device)
    is_col = tb.move_type == REVEAL_COLOR  # [M]
    new_col = perm.long()[:, tb.move_color]  # [B, M]
    moved = ids + (new_col - tb.move_color)  # colour hints are contiguous per target offset
    return torch.where(is_col, moved, ids.expand_as(moved))


def permute_moves(cfg: GameConfig, moves: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Move ids [B, ...] in the original colours -> ids in the permuted game (-1 stays -1)."""
    return _map_ids(move_permutation(cfg, perm), moves)


def unpermute_moves(cfg: GameConfig, moves: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Inverse of permute_moves: ids chosen in the permuted game -> ids in the original game."""
    return permute_moves(cfg, moves, inverse_perms(perm))


def permute_move_values(cfg: GameConfig, x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Per-move values x [B, M, ...] (legal masks, Q-values) re-indexed to the permuted move ids."""
    src = move_permutation(cfg, inverse_perms(perm))  # new id j comes from old id src[j]
    return x.gather(1, src.view(*src.shape, *([1] * (x.dim() - 2))).expand(x.shape))


# ---- states --------------------------------------------------------------------------------------
def permute_state(cfg: GameConfig, state: HanabiState, perm: torch.Tensor) -> HanabiState:
    """The same game with colour c renamed perm[b, c] everywhere (cards, board, knowledge, last move)."""
    perm = perm.to(state.device).long()
    inv = inverse_perms(perm)
    cards = card_permutation(cfg, perm)
    card_src = card_permutation(cfg, inv)  # new card id j held old card id card_src[j]
    return state.replace(
        deck=_map_ids(cards, state.deck),
        hands=_map_ids(cards, state.hands),
        color_plausible=_move_colour_axis(state.color_plausible, inv, 3),
        color_hinted=_map_ids(perm, state.color_hinted),
        fireworks=_move_colour_axis(state.fireworks, inv, 1),
        discards=state.discards.gather(1, card_src),
        last_move=permute_moves(cfg, state.last_move, perm),
        last_card=_map_ids(cards, state.last_card),
    )


# ---- observations --------------------------------------------------------------------------------
@device_tables
def _obs_colour_tables(cfg: GameConfig, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(colour [D], index_with_colour [D, C]) for the canonical layout.

    colour[i] is the colour feature i refers to (-1: none); index_with_colour[i, c] is the index of
    the same feature about colour c instead (i itself where colourless).
    """
    c, r, t, h, p = cfg.colors, cfg.ranks, cfg.card_types, cfg.hand_size, cfg.players
    d = cfg.obs_dim
    colour = torch.full((d,), -1, dtype=torch.long)
    index = torch.arange(d)[:, None].repeat(1, c)
    cols = torch.arange(c)

    def blocks(start: int, n: int, stride: int, width: int) -> None:
        """n colour blocks of `width` features each, colour k at start + k * stride."""
        for k in range(n):
            for w in range(width):
                i = start + k * stride + w
                colour[i] = k
                index[i] = start + cols * stride + w

    sl = cfg.layout.slices
    for j in range((p - 1) * h):  # other players' cards: one-hot over card ids, colour-major
        blocks(sl["hands.cards"].start + j * t, c, r, r)
    blocks(sl["board.fireworks"].start, c, r, r)
    per_colour = sum(cfg.copies(k) for k in range(r))  # discards: colour-major thermometers
    blocks(sl["discards"].start, c, per_colour, per_colour)
    blocks(sl["last_action.color"].start, c, 1, 1)
    blocks(sl["last_action.card"].start, c, r, r)
    per_slot = t + c + r
    for j in range(p * h):  # knowledge: plausible cards, then hinted colour, then hinted rank
        base = sl["knowledge"].start + j * per_slot
        blocks(base, c, r, r)
        blocks(base + t, c, 1, 1)
    return colour.to(device), index.to(device)


def observation_permutation(cfg: GameConfig, perm: torch.Tensor) -> torch.Tensor:
    """[B, D]: source feature of each feature in the permuted observation (new[j] = old[src[j]])."""
    colour, index = _obs_colour_tables(cfg, perm.device)
    inv = inverse_perms(perm.long())
    src_colour = inv[:, colour.clamp(min=0)]  # [B, D] the old colour that new colour j came from
    return index[torch.arange(cfg.obs_dim, device=perm.device), src_colour]  # [B, D]


def permute_observation(cfg: GameConfig, obs: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Canonical observations obs [B, ..., D] -> the observations of the colour-permuted game."""
    src = observation_permutation(cfg, perm)
    b, d = src.shape
    view = src.view(b, *([1] * (obs.dim() - 2)), d).expand(obs.shape)
    return obs.gather(-1, view)
