"""Small batched scripted policies for tests, conformance runs and baselines.

A state policy is a pure function (cfg, state, seeds [B]) -> legal move ids [B]: mask arithmetic
over the batch, no loop over games, no host sync. Randomness comes from hashing (seed, step, tag),
so a game's moves depend only on its own seed and state: the same on any batch size and device.
An observation policy (cfg, obs [B, D], legal [B, M], seeds [B]) -> moves sees only what a player
sees (the canonical observation) and can play HLE's rl_env through lbs.hanabi.interop.rl_env.RlEnvAgent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .config import DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK, GameConfig
from .encode import current_observer, encode, own_hands
from .engine import device_tables, legal_moves, random_moves, tables
from .rng import hash_keys, uniform
from .state import HanabiState

StatePolicy = Callable[[GameConfig, HanabiState, torch.Tensor], torch.Tensor]
ObsPolicy = Callable[[GameConfig, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

# Distinct streams of random numbers per use, so policies mixed together stay independent.
_TAG_TIE, _TAG_HINT, _TAG_DISCARD, _TAG_PLAY, _TAG_MIX, _TAG_OBS = 11, 12, 13, 14, 15, 16


@device_tables
def _slot_ids(cfg: GameConfig, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Move ids of (discard slot s) and (play slot s), each [H]."""
    table = cfg.move_table
    disc = [
        next(m for m, row in enumerate(table) if row[0] == DISCARD and row[1] == s)
        for s in range(cfg.hand_size)
    ]
    play = [
        next(m for m, row in enumerate(table) if row[0] == PLAY and row[1] == s) for s in range(cfg.hand_size)
    ]
    return torch.tensor(disc, device=device), torch.tensor(play, device=device)


def _keys(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor, tag: int) -> torch.Tensor:
    """[B, M] random 32-bit keys, one per move, from (seed, step, tag): one hash per policy call."""
    idx = torch.arange(cfg.num_moves, device=state.device)
    return hash_keys(seeds.long()[:, None], state.num_steps[:, None], tag, idx)


def _random_among(mask: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """A uniformly random True index per row (0 where none)."""
    return torch.where(mask, keys, -1).argmax(1)


def _first(mask: torch.Tensor) -> torch.Tensor:
    """Index of the first True per row (0 where none)."""
    return mask.long().argmax(1)


def _kind_masks(cfg: GameConfig, device: torch.device) -> dict[str, torch.Tensor]:
    """[M] bool per kind of move."""
    tb = tables(cfg, device)
    return {
        "hint": (tb.move_type == REVEAL_COLOR) | (tb.move_type == REVEAL_RANK),
        "discard": tb.move_type == DISCARD,
        "play": tb.move_type == PLAY,
    }


# ---- simple policies ------------------------------------------------------------------------------
def random_policy(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
    """A uniformly random legal move."""
    return random_moves(cfg, state, seeds)


def _kind_first(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor, order: Sequence[str], tag: int):
    """A random legal move of the first kind in `order` ('hint', 'discard', 'play') that has one."""
    legal = legal_moves(cfg, state)
    keys = _keys(cfg, state, seeds, tag)
    kinds = _kind_masks(cfg, state.device)
    moves = _random_among(legal, keys)
    for kind in reversed(order):
        allowed = legal & kinds[kind][None, :]
        moves = torch.where(allowed.any(1), _random_among(allowed, keys), moves)
    return moves


def bomber(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
    """Plays a random card every turn: loses all lives quickly."""
    return _kind_first(cfg, state, seeds, ("play",), _TAG_PLAY)


def hint_heavy(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
    """Hints whenever it can, else discards: hint tokens sit at 0."""
    return _kind_first(cfg, state, seeds, ("hint", "discard"), _TAG_HINT)


def discard_heavy(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
    """Discards whenever it can, else hints: hint tokens sit at the maximum."""
    return _kind_first(cfg, state, seeds, ("discard", "hint"), _TAG_DISCARD)


# ---- the cheater ----------------------------------------------------------------------------------
def _useless_cards(cfg: GameConfig, state: HanabiState, cards: torch.Tensor) -> torch.Tensor:
    """[B, K] bool: card ids [B, K] that can never score (already played, or a lower rank is gone)."""
    tb = tables(cfg, state.device)
    b = state.batch_size
    c = cards.clamp(min=0)
    col, rnk = tb.card_color[c], tb.card_rank[c]
    fw = state.fireworks  # [B, C]
    ranks = torch.arange(cfg.ranks, device=state.device)
    gone = (state.discards >= tb.card_counts).reshape(b, cfg.colors, cfg.ranks)  # every copy discarded
    blocked = gone & (ranks >= fw[:, :, None])
    limit = torch.where(blocked, ranks, cfg.ranks).min(-1).values  # [B, C] first unreachable rank
    return (rnk < fw.gather(1, col)) | (rnk > limit.gather(1, col))


def cheater(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
    """Sees its own cards: plays a playable card (lowest rank first), else hints at random if it has
    a token, else discards the least valuable card (useless, then duplicated, then not the last
    copy; highest rank first). Reaches the maximum score in most full-deck games."""
    tb = tables(cfg, state.device)
    b = state.batch_size
    legal = legal_moves(cfg, state)
    keys = _keys(cfg, state, seeds, _TAG_TIE)
    hand = own_hands(cfg, state, current_observer(state))[:, 0]  # [B, H]
    held = hand >= 0
    card = hand.clamp(min=0)
    col, rnk = tb.card_color[card], tb.card_rank[card]
    playable = held & (rnk == state.fireworks.gather(1, col))
    useless = held & _useless_cards(cfg, state, hand)
    everyone = state.hands.reshape(b, -1)  # [B, P*H]
    copies_held = ((card[:, :, None] == everyone[:, None, :]) & (everyone >= 0)[:, None, :]).sum(-1)
    dup = held & (copies_held > 1)
    last_copy = tb.card_counts[card] - state.discards.gather(1, card) <= 1

    disc_ids, play_ids = _slot_ids(cfg, state.device)
    tie = keys[:, play_ids].double() / 2.0**33  # [B, H] in [0, 0.5)
    play = play_ids[torch.where(playable, -rnk.double() + tie, -float("inf")).argmax(1)]
    value = 3 * useless.long() + 2 * (dup & ~useless).long() + (~last_copy & ~dup & ~useless).long()
    discard = disc_ids[torch.where(held, (value * cfg.ranks + rnk).double() + tie, -float("inf")).argmax(1)]
    hints = legal & _kind_masks(cfg, state.device)["hint"][None, :]
    hint = _random_among(hints, keys)
    can_discard = legal.gather(1, discard[:, None]).squeeze(1)
    moves = torch.where(
        playable.any(1),
        play,
        torch.where(hints.any(1), hint, torch.where(can_discard, discard, _random_among(legal, keys))),
    )
    return torch.where(legal.gather(1, moves[:, None]).squeeze(1), moves, _random_among(legal, keys))


# ---- the cautious baseline (observation policy) -------------------------------------------------
def safe_play_obs(
    cfg: GameConfig, obs: torch.Tensor, legal: torch.Tensor, seeds: torch.Tensor
) -> torch.Tensor:
    """Never plays a card its hints do not prove playable. Else hints a partner's playable card that
    its holder cannot yet prove (nearest partner first: the rank if that alone proves it or the colour
    is known, else the colour), else discards (a card proven useless, else the oldest unhinted card),
    else gives a random hint. Reads only the canonical observation obs [B, D] of the player to move."""
    b, dev = obs.shape[0], obs.device
    p, h, c, r, t = cfg.players, cfg.hand_size, cfg.colors, cfg.ranks, cfg.card_types
    lay, tb = cfg.layout, tables(cfg, dev)
    fw = (
        (lay.view(obs, "board.fireworks").reshape(b, c, r) > 0.5).long() * torch.arange(1, r + 1, device=dev)
    ).sum(-1)
    info = (lay.view(obs, "board.info") > 0.5).sum(-1)
    know = lay.view(obs, "knowledge").reshape(b, p, h, t + c + r) > 0.5  # observer first
    plaus = know[..., :t]  # [B, P, H, T]
    hinted = know[..., t:].any(-1)  # [B, P, H] some positive hint
    fw_of_card = fw.gather(1, tb.card_color[None, :].expand(b, -1))  # [B, T]
    playable_id = tb.card_rank[None, :] == fw_of_card
    useless_id = tb.card_rank[None, :] < fw_of_card

    own, own_held = plaus[:, 0], plaus[:, 0].any(-1)  # empty slots have no knowledge bits
    proven_play = own_held & ~(own & ~playable_id[:, None, :]).any(-1)
    proven_useless = own_held & ~(own & ~useless_id[:, None, :]).any(-1)

    cards = lay.view(obs, "hands.cards").reshape(b, p - 1, h, t) > 0.5  # partners by offset 1..P-1
    p_held, p_card = cards.any(-1), cards.long().argmax(-1)
    p_playable = p_held & playable_id.gather(1, p_card.reshape(b, -1)).reshape(b, p - 1, h)
    p_proven = ~(plaus[:, 1:] & ~playable_id[:, None, None, :]).any(-1)
    target = (p_playable & ~p_proven).reshape(b, -1)
    first = _first(target)  # (offset-1) * H + slot
    offset = first // h + 1
    tcard = p_card.reshape(b, -1).gather(1, first[:, None]).squeeze(1)
    tplaus = (
        plaus[:, 1:].reshape(b, -1, c, r).gather(1, first[:, None, None, None].expand(-1, 1, c, r)).squeeze(1)
    )
    col_plaus = tplaus.any(-1)  # [B, C]
    tcol, trank = tb.card_color[tcard], tb.card_rank[tcard]
    rank_proves = ~(col_plaus & (fw != trank[:, None])).any(1)
    use_rank = rank_proves | (col_plaus.sum(1) == 1)
    is_off = tb.move_offset[None, :] == offset[:, None]
    colour_hint = (tb.move_type == REVEAL_COLOR)[None, :] & is_off & (tb.move_color[None, :] == tcol[:, None])
    rank_hint = (tb.move_type == REVEAL_RANK)[None, :] & is_off & (tb.move_rank[None, :] == trank[:, None])
    hint = torch.where(use_rank[:, None], rank_hint, colour_hint).long().argmax(1)

    disc_ids, play_ids = _slot_ids(cfg, dev)
    chop = own_held & ~hinted[:, 0]
    disc_slot = torch.where(proven_useless.any(1), _first(proven_useless), _first(chop))
    keys = hash_keys(seeds.long()[:, None], _TAG_OBS, torch.arange(cfg.num_moves, device=dev))
    any_hint = _random_among(legal & _kind_masks(cfg, dev)["hint"][None, :], keys)
    fallback = _random_among(legal, keys)
    moves = torch.where(
        proven_play.any(1),
        play_ids[_first(proven_play)],
        torch.where(
            (info > 0) & target.any(1),
            hint,
            torch.where(info < cfg.max_info_tokens, disc_ids[disc_slot], any_hint),
        ),
    )
    return torch.where(legal.gather(1, moves[:, None]).squeeze(1), moves, fallback)


def random_obs(cfg: GameConfig, obs: torch.Tensor, legal: torch.Tensor, seeds: torch.Tensor) -> torch.Tensor:
    """A uniformly random legal move, as an observation policy."""
    keys = hash_keys(seeds.long()[:, None], _TAG_OBS, torch.arange(cfg.num_moves, device=obs.device))
    return _random_among(legal, keys)


def from_obs_policy(policy: ObsPolicy) -> StatePolicy:
    """A state policy that shows `policy` only the mover's canonical observation."""

    def run(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
        obs = encode(cfg, state, current_observer(state))[:, 0]
        step_seeds = hash_keys(seeds.long(), state.num_steps, _TAG_OBS)
        return policy(cfg, obs, legal_moves(cfg, state), step_seeds)

    run.__name__ = getattr(policy, "__name__", "obs_policy")
    return run


safe_play = from_obs_policy(safe_play_obs)
safe_play.__doc__ = "The cautious baseline (safe_play_obs) as a state policy."


# ---- combinations ---------------------------------------------------------------------------------
def styles(policies: Sequence[StatePolicy], weights: Sequence[Sequence[float]]) -> StatePolicy:
    """Game b keeps style s = seeds[b] % S for the whole game; each of its moves comes from
    policies[k] with probability weights[s][k], drawn per game and step. Every policy runs once per
    call on the whole batch, whatever the styles."""
    if not policies:
        raise ValueError("styles of no policies")
    w = torch.tensor(weights, dtype=torch.float64)
    if w.dim() != 2 or w.shape[1] != len(policies) or (w < 0).any() or (w.sum(1) <= 0).any():
        raise ValueError(
            f"weights must be S rows of {len(policies)} non-negative numbers, none all 0: {weights}"
        )
    cdf = w.cumsum(1) / w.sum(1, keepdim=True)  # [S, K]

    def run(cfg: GameConfig, state: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
        moves = torch.stack([pol(cfg, state, seeds) for pol in policies], dim=1)  # [B, K]
        style = seeds.long() % cdf.shape[0]
        u = uniform(seeds.long(), state.num_steps, _TAG_MIX)  # [B]
        k = (u[:, None] >= cdf.to(state.device)[style][:, :-1]).sum(1)
        return moves.gather(1, k[:, None]).squeeze(1)

    return run


def mixture(policies: Sequence[StatePolicy], weights: Sequence[float] | None = None) -> StatePolicy:
    """Each move comes from policies[k] with probability weights[k] (uniform by default)."""
    return styles(policies, [list(weights) if weights is not None else [1.0] * len(policies)])


def by_game(policies: Sequence[StatePolicy]) -> StatePolicy:
    """Game b always follows policies[seeds[b] % K]."""
    k = len(policies)
    return styles(policies, [[float(i == j) for j in range(k)] for i in range(k)])


POLICIES: dict[str, StatePolicy] = {
    "random": random_policy,
    "cheater": cheater,
    "bomber": bomber,
    "hint_heavy": hint_heavy,
    "discard_heavy": discard_heavy,
    "safe_play": safe_play,
}

# One row per game style of conformance_policy, over the columns of POLICIES.
CONFORMANCE_STYLES = (
    # random cheater bomber hint discard safe
    (0.0, 1.0, 0.0, 0.0, 0.0, 0.0),  # perfect play: maximum score, fireworks completed at any hint count
    (0.1, 0.9, 0.0, 0.0, 0.0, 0.0),  # near perfect: long games that end in the final round
    (0.0, 0.7, 0.0, 0.0, 0.3, 0.0),  # discards near full hint tokens while scoring
    (0.5, 0.0, 0.5, 0.0, 0.0, 0.0),  # bombs out
    (0.0, 0.0, 0.0, 1.0, 0.0, 0.0),  # hint tokens at 0
    (0.0, 0.0, 0.0, 0.0, 1.0, 0.0),  # hint tokens at the maximum
    (0.0, 0.0, 0.0, 0.0, 0.0, 1.0),  # cautious: plays only proven cards
    (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),  # uniformly random
)


def conformance_policy() -> StatePolicy:
    """Per game one of CONFORMANCE_STYLES (by seed), which between them reach the rules' corners."""
    return styles(list(POLICIES.values()), CONFORMANCE_STYLES)
