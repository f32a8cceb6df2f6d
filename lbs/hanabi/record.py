"""Game records: a config, a deck order and the move ids, which fully determine a game.

Records replay in our engine (many at once), in HLE (lbs.hanabi.hle), save to JSON, export to
hanab.live's JSON replay format, and render as a readable trace in HLE's own text format (used by the
golden playthroughs in tests/fixtures/playthroughs).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from . import engine
from .config import COLOR_CHARS, DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK, GameConfig
from .state import HanabiState

# Configs that every conformance check covers: golden fixtures and playthroughs exist for each name
# (experiments/make_fixtures.py regenerates them; tests fail for a name without one).
NAMED_CONFIGS: dict[str, GameConfig] = {
    "p2": GameConfig(players=2),
    "p3": GameConfig(players=3),
    "p4": GameConfig(players=4),
    "p5": GameConfig(players=5),
    "p2_c2_r3": GameConfig(players=2, colors=2, ranks=3),
    "p3_c1_h3": GameConfig(players=3, colors=1, hand_size=3),
    "p2_h6": GameConfig(players=2, hand_size=6),
    "p4_l1_i2": GameConfig(players=4, max_life_tokens=1, max_info_tokens=2),
    "p2_nobomb": GameConfig(players=2, bomb_zero=False),
}


@dataclass
class GameRecord:
    """One game. config is GameConfig.to_dict(); deck the card ids in deal order; moves the move ids;
    score the final score (None for an unfinished game)."""

    config: dict
    deck: list[int]
    moves: list[int]
    score: int | None = None

    @property
    def cfg(self) -> GameConfig:
        return GameConfig.from_dict(self.config)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> GameRecord:
        missing = {"config", "deck", "moves"} - set(d)
        if missing:
            raise ValueError(f"game record lacks {sorted(missing)}")
        return cls(
            dict(d["config"]), [int(x) for x in d["deck"]], [int(x) for x in d["moves"]], d.get("score")
        )

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict()) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> GameRecord:
        return cls.from_dict(json.loads(Path(path).read_text()))


def save_records(records: list[GameRecord], path: str | Path) -> Path:
    """Many records in one JSON file (a list)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r.to_dict() for r in records]) + "\n")
    return path


def load_records(path: str | Path) -> list[GameRecord]:
    data = json.loads(Path(path).read_text())
    return [GameRecord.from_dict(d) for d in (data if isinstance(data, list) else [data])]


def records_from_batch(
    cfg: GameConfig,
    decks: torch.Tensor,
    moves: torch.Tensor,
    lengths: torch.Tensor,
    scores: torch.Tensor | None,
) -> list[GameRecord]:
    """Records from batched tensors: decks [B, N], moves [B, T] (first lengths[b] used), scores [B]."""
    d, m, n = decks.cpu().tolist(), moves.cpu().tolist(), lengths.cpu().tolist()
    s = scores.cpu().tolist() if scores is not None else [None] * len(d)
    return [GameRecord(cfg.to_dict(), d[i], m[i][: n[i]], s[i]) for i in range(len(d))]


# ---- replay in our engine -------------------------------------------------------------------------
def _batch(records: list[GameRecord], device) -> tuple[GameConfig, torch.Tensor, torch.Tensor, torch.Tensor]:
    if not records:
        raise ValueError("no records to replay")
    cfg = records[0].cfg
    for i, r in enumerate(records):
        if r.cfg != cfg:
            raise ValueError(
                f"record {i} has config {r.cfg}, record 0 has {cfg}; replay one config at a time"
            )
    decks = torch.tensor([r.deck for r in records], dtype=torch.long, device=device)
    engine.check_decks(cfg, decks)
    lengths = torch.tensor([len(r.moves) for r in records], dtype=torch.long, device=device)
    t = int(lengths.max())
    moves = torch.zeros(len(records), max(t, 1), dtype=torch.long, device=device)
    for i, r in enumerate(records):
        moves[i, : len(r.moves)] = torch.tensor(r.moves, dtype=torch.long)
    return cfg, decks, moves, lengths


def replay_steps(records: list[GameRecord], device: torch.device | str = "cpu"):
    """Replay records (one config) in lockstep. Yields (t, state, moves) before each step t, where
    moves [B] is -1 for games whose record has ended, and finally (T, final state, all -1).

    Illegal moves raise engine.IllegalMoveError naming the game; a record that goes on after its
    game ended raises ValueError.
    """
    cfg, decks, moves, lengths = _batch(records, torch.device(device))
    state = engine.initial_state(cfg, decks)
    t_max = int(lengths.max())
    for t in range(t_max + 1):
        active = t < lengths
        mv = torch.where(active, moves[:, min(t, moves.shape[1] - 1)], -1)
        yield t, state, mv
        if t == t_max:
            break
        over = active & state.done
        if bool(over.any()):
            i = int(over.nonzero()[0, 0])
            raise ValueError(f"record {i} has moves after its game ended (move {t})")
        new, _, _ = engine.step(cfg, state, mv.clamp(min=0), checked=True)
        state = new.where(active, state)


def replay(
    records: list[GameRecord], device: torch.device | str = "cpu", check_scores: bool = True
) -> HanabiState:
    """Final states [B] of records of one config, replayed together; checks recorded scores."""
    *_, (_, state, _) = replay_steps(records, device)
    if check_scores:
        for i, r in enumerate(records):
            if r.score is not None and (int(state.score[i]) != r.score or not bool(state.done[i])):
                raise ValueError(
                    f"record {i}: recorded score {r.score}, replay gives {int(state.score[i])} "
                    f"(finished: {bool(state.done[i])})"
                )
    return state


def replay_hle(record: GameRecord):
    """The record replayed in HLE: an lbs.hanabi.hle.HLEState (needs hanabi-learning-environment)."""
    from .hle import hle_game

    cfg = record.cfg
    g = hle_game(cfg)
    st = g.new_state(record.deck)
    for t, m in enumerate(record.moves):
        if st.state.is_terminal():
            raise ValueError(f"record has moves after its game ended (move {t})")
        if not g.legal_mask(st)[m]:
            raise ValueError(f"move {t}: {cfg.move_name(m)} is illegal in HLE")
        g.apply(st, m)
    return st


# ---- hanab.live -----------------------------------------------------------------------------------
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
            moves.append(slot if kind == HANABLIVE_DISCARD else cfg.hand_size + slot)
        elif kind in (HANABLIVE_COLOR_CLUE, HANABLIVE_RANK_CLUE):
            off = (a["target"] - cur) % cfg.players
            if off == 0:
                raise ValueError(f"action {t}: player {cur} clues themself")
            base = 2 * cfg.hand_size
            if kind == HANABLIVE_COLOR_CLUE:
                moves.append(base + (off - 1) * cfg.colors + a["value"])
            else:
                moves.append(base + (cfg.players - 1) * cfg.colors + (off - 1) * cfg.ranks + a["value"] - 1)
        else:
            raise ValueError(f"action {t}: hanab.live action type {kind} is not a play, discard or clue")
    return GameRecord(cfg.to_dict(), deck, moves, None)


# ---- readable traces ------------------------------------------------------------------------------
def card_str(cfg: GameConfig, card: int) -> str:
    return "XX" if card < 0 else f"{COLOR_CHARS[card // cfg.ranks]}{card % cfg.ranks + 1}"


def render(cfg: GameConfig, state: HanabiState, row: int = 0, discard_order: list[int] | None = None) -> str:
    """Game `row` of a state in HLE's HanabiState text format (str(pyhanabi.HanabiState)).

    HLE lists discards in the order they happened, which a state does not keep: pass discard_order
    (card ids), or they are listed by card id.
    """
    s = {
        name: getattr(state, name)[row].tolist()
        for name in (
            "hands",
            "color_plausible",
            "rank_plausible",
            "color_hinted",
            "rank_hinted",
            "fireworks",
            "discards",
            "info_tokens",
            "life_tokens",
            "cur_player",
            "deck_pos",
        )
    }
    lines = [f"Life tokens: {s['life_tokens']}", f"Info tokens: {s['info_tokens']}"]
    lines.append("Fireworks: " + "".join(f"{COLOR_CHARS[c]}{s['fireworks'][c]} " for c in range(cfg.colors)))
    lines.append("Hands:")
    for p in range(cfg.players):
        if p > 0:
            lines.append("-----")
        if p == s["cur_player"]:
            lines.append("Cur player")
        for k, card in enumerate(s["hands"][p]):
            if card < 0:
                break
            ch, rh = s["color_hinted"][p][k], s["rank_hinted"][p][k]
            hinted = (COLOR_CHARS[ch] if ch >= 0 else "X") + (str(rh + 1) if rh >= 0 else "X")
            plaus = "".join(COLOR_CHARS[c] for c in range(cfg.colors) if s["color_plausible"][p][k][c])
            plaus += "".join(str(r + 1) for r in range(cfg.ranks) if s["rank_plausible"][p][k][r])
            lines.append(f"{card_str(cfg, card)} || {hinted}|{plaus}")
    lines.append(f"Deck size: {cfg.num_cards - s['deck_pos']}")
    if discard_order is None:
        discard_order = [c for c, n in enumerate(s["discards"]) for _ in range(n)]
    lines.append("Discards:" + "".join(" " + card_str(cfg, c) for c in discard_order))
    return "\n".join(lines)


def format_playthrough(
    record: GameRecord,
    name: str,
    states: list[str],
    moves: list[tuple[str, int, int]],
    score: int,
    done: bool,
) -> str:
    """The golden-playthrough text: a header (config, deck, move ids), then each state's text, the
    move made from it as (name, player, reward), and the final score."""
    cfg = record.cfg
    out = [
        f"# playthrough {name}".rstrip(),
        f"# config: {json.dumps(record.config, sort_keys=True)}",
        "# deck: " + " ".join(card_str(cfg, c) for c in record.deck),
        "# moves: " + " ".join(str(m) for m in record.moves),
        "",
    ]
    for t, text in enumerate(states):
        out += [f"## state {t}", text]
        if t < len(moves):
            move, player, reward = moves[t]
            out.append(f"## move {t}: {move} by player {player}, reward {reward}")
    out += [f"## final score {score}, finished {done}", ""]
    return "\n".join(out)


def playthrough(record: GameRecord, name: str = "") -> str:
    """A readable trace of a whole game in our engine (HLE's state text after every move)."""
    cfg = record.cfg
    discards: list[int] = []
    state = engine.initial_state(cfg, torch.tensor([record.deck]))
    states, moves = [render(cfg, state, 0, discards)], []
    for m in record.moves:
        new, reward, _ = engine.step(cfg, state, torch.tensor([m]), checked=True)
        kind = cfg.move_table[m][0]
        if kind == DISCARD or (kind == PLAY and not bool(new.last_scored[0])):
            discards.append(int(new.last_card[0]))
        moves.append((cfg.move_name(m), int(state.cur_player[0]), int(reward[0])))
        state = new
        states.append(render(cfg, state, 0, discards))
    return format_playthrough(record, name, states, moves, int(state.score[0]), bool(state.done[0]))
