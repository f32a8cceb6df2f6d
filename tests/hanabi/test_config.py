"""GameConfig: validation, declared sizes, and the layout checked against real encoded tensors."""

from __future__ import annotations

import pytest
import torch
from conftest import CONFIGS

from lbs.hanabi import GameConfig, encode, legal_moves, random_moves, reset, step
from lbs.hanabi.config import DISCARD, PLAY, REVEAL_COLOR
from lbs.hanabi.encode import own_hands, public_features


# ---- validation ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"players": 1}, "players"),
        ({"players": 6}, "players"),
        ({"players": 2.0}, "players"),
        ({"colors": 0}, "colors"),
        ({"colors": 6}, "colors"),
        ({"ranks": 0}, "ranks"),
        ({"ranks": 6}, "ranks"),
        ({"hand_size": -1}, "hand_size"),
        ({"players": 5, "colors": 1, "hand_size": 4}, "hand_size"),  # 20 cards in hands, 10 in the deck
        ({"max_info_tokens": 0}, "max_info_tokens"),
        ({"max_life_tokens": 0}, "max_life_tokens"),
        ({"max_life_tokens": True}, "max_life_tokens"),
        ({"bomb_zero": "yes"}, "bomb_zero"),
    ],
)
def test_invalid_config_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"GameConfig\.{field}="):
        GameConfig(**kwargs)


def test_default_hand_sizes_follow_hle():
    assert [GameConfig(players=p).hand_size for p in range(2, 6)] == [5, 5, 4, 4]
    assert GameConfig(players=4, hand_size=6).hand_size == 6


@pytest.mark.parametrize(
    "players, obs_dim, moves", [(2, 658, 20), (3, 956, 30), (4, 1041, 38), (5, 1280, 48)]
)
def test_full_game_sizes(players, obs_dim, moves):
    cfg = GameConfig(players=players)
    assert cfg.obs_dim == obs_dim
    assert cfg.num_moves == moves
    assert cfg.num_cards == 50 and cfg.card_types == 25 and cfg.max_score == 25
    assert cfg.public_dim == obs_dim - (players - 1) * cfg.hand_size * cfg.card_types


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS.keys())
def test_config_round_trips_and_moves_are_named(cfg):
    assert GameConfig.from_dict(cfg.to_dict()) == cfg
    names = [cfg.move_name(m) for m in range(cfg.num_moves)]
    assert len(set(names)) == cfg.num_moves
    assert len(cfg.move_table) == cfg.num_moves
    assert cfg.move_name(cfg.num_moves).startswith("<invalid")
    assert sum(cfg.card_counts) == cfg.num_cards


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS.keys())
def test_move_id_helpers_agree_with_the_move_table(cfg):
    """discard/play/colour-hint/rank-hint move ids (ints and tensors) are the table's rows of that kind."""
    for m, (kind, slot, off, c, r) in enumerate(cfg.move_table):
        if kind in (DISCARD, PLAY):
            got = cfg.discard_move(slot) if kind == DISCARD else cfg.play_move(slot)
        else:
            got = cfg.color_hint_move(off, c) if kind == REVEAL_COLOR else cfg.rank_hint_move(off, r)
        assert got == m, cfg.move_name(m)
    offs = torch.arange(1, cfg.players)[:, None]
    colours = cfg.color_hint_move(offs, torch.arange(cfg.colors))  # [P-1, C]
    ranks = cfg.rank_hint_move(offs, torch.arange(cfg.ranks))
    assert torch.cat([colours.flatten(), ranks.flatten()]).tolist() == list(range(2 * cfg.hand_size,
                                                                                 cfg.num_moves))


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS.keys())
def test_sizes_agree_with_hle(cfg):
    pyhanabi = pytest.importorskip("hanabi_learning_environment.pyhanabi")
    game = pyhanabi.HanabiGame(cfg.hle_params())
    enc = pyhanabi.ObservationEncoder(game, pyhanabi.ObservationEncoderType.CANONICAL)
    assert enc.shape() == [cfg.obs_dim]
    assert game.max_moves() == cfg.num_moves
    assert game.hand_size() == cfg.hand_size
    assert [game.get_move_uid(game.get_move(m)) for m in range(cfg.num_moves)] == list(range(cfg.num_moves))


# ---- declare once, check against reality -----------------------------------------------------------
def _states(cfg: GameConfig, games: int = 12, seed: int = 3):
    """States along random playouts (every step, every game), concatenated into one batch."""
    seeds = torch.arange(games) + seed * 1000
    st = reset(cfg, seeds)
    out = [st]
    while not bool(st.done.all()):
        st, _, _ = step(cfg, st, random_moves(cfg, st, seeds))
        out.append(st)
    return type(st).cat(out)


def _thermo_ok(bits: torch.Tensor, value: torch.Tensor) -> bool:
    """bits [..., n] is a thermometer of value [...]: the first `value` bits set, no others."""
    want = torch.arange(bits.shape[-1]) < value[..., None]
    return bool(torch.equal(bits.bool(), want))


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS.keys())
def test_layout_sections_match_encoded_tensors(cfg):
    st = _states(cfg)
    obs = encode(cfg, st)  # [B, P, D], observers 0..P-1
    b, p, h, c, r, t = st.batch_size, cfg.players, cfg.hand_size, cfg.colors, cfg.ranks, cfg.card_types
    lay = cfg.layout
    assert obs.shape == (b, p, cfg.obs_dim) and lay.dim == cfg.obs_dim
    sizes = {name: lay.view(obs, name).shape[-1] for name, _ in lay.sections}
    assert sizes == dict(lay.sections)
    assert set(obs.unique().tolist()) <= {0.0, 1.0}
    rel = (torch.arange(p)[:, None] + torch.arange(p)[None, :]) % p  # [K, P]: observer k's j-th player

    # hands.cards: one bit per held card of every other player, at its card id
    cards = lay.view(obs, "hands.cards").reshape(b, p, p - 1, h, t)
    others = st.hands[:, rel[:, 1:]]  # [B, K, P-1, H]
    held = others >= 0
    assert torch.equal(cards.sum(-1), held.float())
    decoded = torch.where(held, cards.argmax(-1), -1)
    assert torch.equal(decoded, others)

    # hands.missing: a player's hand is not full (observer first)
    missing = lay.view(obs, "hands.missing")
    assert torch.equal(missing.bool(), ((st.hands >= 0).sum(2) < h)[:, rel])

    # board: deck thermometer, top firework rank per colour, token thermometers
    assert _thermo_ok(lay.view(obs, "board.deck"), (cfg.num_cards - st.deck_pos)[:, None].expand(b, p))
    fw = lay.view(obs, "board.fireworks").reshape(b, p, c, r)
    assert torch.equal(fw.sum(-1), (st.fireworks > 0)[:, None, :].expand(b, p, c).float())
    top = torch.where(fw.sum(-1) > 0, fw.argmax(-1) + 1, 0)
    assert torch.equal(top, st.fireworks[:, None, :].expand(b, p, c))
    assert _thermo_ok(lay.view(obs, "board.info"), st.info_tokens[:, None].expand(b, p))
    assert _thermo_ok(lay.view(obs, "board.lives"), st.life_tokens[:, None].expand(b, p))

    # discards: one thermometer over copies per card id, summing to the discard count
    disc = lay.view(obs, "discards")
    assert torch.equal(disc.sum(-1), st.discards.sum(1)[:, None].expand(b, p).float())
    start = 0
    for card, n in enumerate(cfg.card_counts):
        assert _thermo_ok(disc[..., start : start + n], st.discards[:, None, card].expand(b, p))
        start += n

    # last_action: empty before the first move, otherwise one actor and one move type
    la = lay.view(obs, "last_action")
    first = st.last_player < 0
    assert torch.equal(la.sum(-1)[first], torch.zeros(int(first.sum()), p))
    moved = (~first)[:, None].expand(b, p).float()
    assert torch.equal(lay.view(obs, "last_action.actor").sum(-1), moved)
    assert torch.equal(lay.view(obs, "last_action.type").sum(-1), moved)
    actor = (st.last_player[:, None] - torch.arange(p)) % p
    assert torch.equal(lay.view(obs, "last_action.actor").argmax(-1)[~first], actor[~first])

    # knowledge: zero on empty slots; the true card is always plausible; hinted bits agree with it
    per_slot = t + c + r
    know = lay.view(obs, "knowledge").reshape(b, p, p, h, per_slot)
    own = st.hands[:, rel]  # [B, K, P, H] card of the j-th player from observer k
    empty = own < 0
    assert bool((know.sum(-1)[empty] == 0).all())
    true_card = own.clamp(min=0)
    plausible = know[..., :t].gather(-1, true_card[..., None]).squeeze(-1)
    assert bool((plausible[~empty] == 1).all())
    hinted_c = know[..., t : t + c]
    hinted_r = know[..., t + c :]
    assert bool((hinted_c.sum(-1) <= 1).all()) and bool((hinted_r.sum(-1) <= 1).all())
    has_c = hinted_c.sum(-1) > 0
    assert torch.equal(hinted_c.argmax(-1)[has_c], (true_card // r)[has_c])
    has_r = hinted_r.sum(-1) > 0
    assert torch.equal(hinted_r.argmax(-1)[has_r], (true_card % r)[has_r])

    # public part and own-hand targets
    assert public_features(cfg, obs).shape[-1] == cfg.public_dim
    assert torch.equal(own_hands(cfg, st), st.hands)


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS.keys())
def test_move_table_matches_legal_moves(cfg):
    """At the start every play/discard slot is held; hints follow the declared (offset, colour/rank)."""
    st = reset(cfg, torch.arange(8))
    legal = legal_moves(cfg, st)
    h = cfg.hand_size
    assert bool(legal[:, h : 2 * h].all())  # every slot can be played
    assert not bool(legal[:, :h].any())  # discards are illegal at max hint tokens
    for m, (_kind, _slot, off, colour, rank) in enumerate(cfg.move_table):
        if off < 0:
            continue
        target = st.hands[:, off]  # player 0 moves first, so offset == absolute player
        col, rnk = target // cfg.ranks, target % cfg.ranks
        want = (col == colour).any(1) if colour >= 0 else (rnk == rank).any(1)
        assert torch.equal(legal[:, m], want), cfg.move_name(m)
