"""hanab.live's JSON replay format, both ways, so any game we play can be watched there."""

from __future__ import annotations

from ..config import DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK, GameConfig
from .record import GameRecord

HANABLIVE_VARIANTS = {3: "3 Suits", 4: "4 Suits", 5: "No Variant"}
HANABLIVE_PLAY, HANABLIVE_DISCARD, HANABLIVE_COLOR_CLUE, HANABLIVE_RANK_CLUE = 0, 1, 2, 3
_HANABLIVE_TYPE = {
    PLAY: HANABLIVE_PLAY,
    DISCARD: HANABLIVE_DISCARD,
    REVEAL_COLOR: HANABLIVE_COLOR_CLUE,
    REVEAL_RANK: HANABLIVE_RANK_CLUE,
}
DEFAULT_NAMES = ("Alice", "Bob", "Cathy", "Donald", "Emily")


def _hanablive_options(cfg: GameConfig) -> dict:
    """hanab.live options for a config, or ValueError for rules hanab.live cannot express."""
    problems = []
    if cfg.colors not in HANABLIVE_VARIANTS:
        problems.append(f"{cfg.colors} colours (hanab.live has 3-5 suit variants)")
    if cfg.ranks != 5:
        problems.append(f"{cfg.ranks} ranks (hanab.live always uses 5)")
    if (cfg.max_info_tokens, cfg.max_life_tokens) != (8, 3):  # hanab.live's fixed clue and strike counts
        problems.append(
            f"{cfg.max_info_tokens} hint tokens and {cfg.max_life_tokens} lives (hanab.live: 8 and 3)"
        )
    default = GameConfig(players=cfg.players).hand_size
    if abs(cfg.hand_size - default) > 1:
        problems.append(f"hand size {cfg.hand_size} (hanab.live allows {default} +- 1)")
    if problems:
        raise ValueError(f"hanab.live cannot replay {cfg}: " + "; ".join(problems))
    options: dict = {"variant": HANABLIVE_VARIANTS[cfg.colors]}
    if cfg.hand_size == default + 1:
        options["oneExtraCard"] = True
    elif cfg.hand_size == default - 1:
        options["oneLessCard"] = True
    return options


def _deal_orders(cfg: GameConfig) -> list[list[int]]:
    h = cfg.hand_size
    return [list(range(p * h, (p + 1) * h)) for p in range(cfg.players)]


def to_hanablive(record: GameRecord, names: list[str] | None = None) -> dict:
    """hanab.live's JSON replay format (Hanabi-Live misc/example_game_with_comments.jsonc).

    Suit index = our colour index (HLE's R,Y,G,W,B show as hanab.live's five suits in order); ranks
    are 1-based; play/discard targets are the card's deal-order index ("order"); clue targets are
    absolute player indices; colour-clue values are suit indices, rank-clue values 1-based ranks.
    hanab.live scores a bombed-out game as HLE does (0), and ends games the same ways.
    """
    cfg = record.cfg
    options = _hanablive_options(cfg)
    names = list(names) if names is not None else [DEFAULT_NAMES[p] for p in range(cfg.players)]
    if len(names) != cfg.players:
        raise ValueError(f"{len(names)} names for {cfg.players} players")
    deck = [{"suitIndex": c // cfg.ranks, "rank": c % cfg.ranks + 1} for c in record.deck]
    hands, next_order = _deal_orders(cfg), cfg.players * cfg.hand_size
    actions = []
    for t, m in enumerate(record.moves):
        if not 0 <= m < cfg.num_moves:
            raise ValueError(f"move {t}: {m} is not a move id of {cfg}")
        cur = t % cfg.players
        kind, slot, off, color, rank = cfg.move_table[m]
        if kind in (PLAY, DISCARD):
            if slot >= len(hands[cur]):
                raise ValueError(
                    f"move {t}: {cfg.move_name(m)} but player {cur} holds {len(hands[cur])} cards"
                )
            actions.append({"type": _HANABLIVE_TYPE[kind], "target": hands[cur].pop(slot)})
            if next_order < cfg.num_cards:
                hands[cur].append(next_order)
                next_order += 1
        else:
            value = color if kind == REVEAL_COLOR else rank + 1
            actions.append(
                {"type": _HANABLIVE_TYPE[kind], "target": (cur + off) % cfg.players, "value": value}
            )
    return {"players": names, "deck": deck, "actions": actions, "options": options}


def from_hanablive(data: dict, **rules) -> GameRecord:
    """A GameRecord from hanab.live's JSON replay format (the inverse of to_hanablive).

    rules are extra GameConfig fields (e.g. bomb_zero); colours, players and hand size come from the
    file. Only plain play/discard/clue actions are understood.
    """
    players = len(data["players"])
    variant = data.get("options", {}).get("variant", "No Variant")
    colors = {v: k for k, v in HANABLIVE_VARIANTS.items()}.get(variant)
    if colors is None:
        raise ValueError(
            f"hanab.live variant {variant!r} is not one of {sorted(HANABLIVE_VARIANTS.values())}"
        )
    hand = GameConfig(players=players).hand_size
    hand += bool(data.get("options", {}).get("oneExtraCard")) - bool(
        data.get("options", {}).get("oneLessCard")
    )
    cfg = GameConfig(players=players, colors=colors, hand_size=hand, **rules)
    deck = [int(c["suitIndex"]) * cfg.ranks + int(c["rank"]) - 1 for c in data["deck"]]
    hands, next_order = _deal_orders(cfg), cfg.players * cfg.hand_size
    moves = []
    for t, a in enumerate(data["actions"]):
        cur, kind = t % cfg.players, a["type"]
        if kind in (HANABLIVE_PLAY, HANABLIVE_DISCARD):
            if a["target"] not in hands[cur]:
                raise ValueError(f"action {t}: card {a['target']} is not in player {cur}'s hand")
            slot = hands[cur].index(a["target"])
            hands[cur].pop(slot)
            if next_order < cfg.num_cards:
                hands[cur].append(next_order)
                next_order += 1
            moves.append(cfg.discard_move(slot) if kind == HANABLIVE_DISCARD else cfg.play_move(slot))
        elif kind in (HANABLIVE_COLOR_CLUE, HANABLIVE_RANK_CLUE):
            off = (a["target"] - cur) % cfg.players
            if off == 0:
                raise ValueError(f"action {t}: player {cur} clues themself")
            if kind == HANABLIVE_COLOR_CLUE:
                moves.append(cfg.color_hint_move(off, a["value"]))
            else:
                moves.append(cfg.rank_hint_move(off, a["value"] - 1))
        else:
            raise ValueError(f"action {t}: hanab.live action type {kind} is not a play, discard or clue")
    return GameRecord(cfg.to_dict(), deck, moves, None)


# ---- readable traces ------------------------------------------------------------------------------
