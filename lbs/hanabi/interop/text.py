"""Readable traces: a state and whole games in HLE's own text format (the golden playthroughs)."""

from __future__ import annotations

import json

import torch

from .. import engine
from ..config import COLOR_CHARS, DISCARD, PLAY, GameConfig
from ..state import HanabiState
from .record import GameRecord


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
