"""GameConfig: the one place every Hanabi size comes from.

Rules follow hanabi-learning-environment (HLE); every derived size (moves, deck, feature sections)
is a property here so no other module hard-codes 5, 25, 658 or the like.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field

_MISSING = object()


class cached_property(functools.cached_property):  # a drop-in for functools.cached_property
    """functools.cached_property without the lock Python < 3.12 takes on a miss (3.12 dropped it):
    torch.compile cannot trace that lock, so a first use inside a compiled step broke the graph.
    A race at worst computes the same value twice."""

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        cache = instance.__dict__
        value = cache.get(self.attrname, _MISSING)
        if value is _MISSING:
            value = cache[self.attrname] = self.func(instance)
        return value


MIN_PLAYERS, MAX_PLAYERS = 2, 5
MAX_COLORS, MAX_RANKS = 5, 5
COLOR_CHARS = "RYGWB"

# Move types, in move-id order (HLE's GetMoveUid): discards, plays, colour hints, rank hints.
DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK = 0, 1, 2, 3
MOVE_TYPES = (DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK)
# HLE's order of the move-type bits in the last-action section (play, discard, colour, rank).
LAST_ACTION_TYPE_ORDER = (PLAY, DISCARD, REVEAL_COLOR, REVEAL_RANK)


@dataclass(frozen=True)
class Layout:
    """Named, contiguous slices of one flat feature vector (index by name, never by offset).

    Sections named 'group.part' also give their group a slice ('board' spans every 'board.*')."""

    sections: tuple[tuple[str, int], ...]

    @cached_property
    def slices(self) -> dict[str, slice]:
        out, start = {}, 0
        for name, size in self.sections:
            out[name] = slice(start, start + size)
            start += size
        groups: dict[str, slice] = {}
        for name, sl in out.items():
            if "." in name:
                g = name.split(".")[0]
                groups[g] = slice(groups[g].start if g in groups else sl.start, sl.stop)
        return out | groups

    @property
    def dim(self) -> int:
        return sum(size for _, size in self.sections)

    def view(self, x, name: str):
        """x[..., section] for a section name."""
        return x[..., self.slices[name]]

    def section_of(self, index: int) -> str:
        for name, sl in self.slices.items():
            if sl.start <= index < sl.stop:
                return name
        raise IndexError(f"feature {index} outside layout of {self.dim}")


@dataclass(frozen=True)
class GameConfig:
    """Hanabi rules. Defaults are HLE's full game for the given number of players.

    bomb_zero: HLE's rule (score 0 when the last life is lost); False keeps the fireworks score.
    """

    players: int = 2
    colors: int = 5
    ranks: int = 5
    hand_size: int = field(default=0)  # 0: HLE default (5 for 2-3 players, 4 for 4-5)
    max_info_tokens: int = 8
    max_life_tokens: int = 3
    bomb_zero: bool = True

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> None:
            raise ValueError(f"GameConfig.{name}={getattr(self, name)!r}: {why}")

        for name in ("players", "colors", "ranks", "hand_size", "max_info_tokens", "max_life_tokens"):
            if not isinstance(getattr(self, name), int) or isinstance(getattr(self, name), bool):
                bad(name, "must be an int")
        if not MIN_PLAYERS <= self.players <= MAX_PLAYERS:
            bad("players", f"must be in {MIN_PLAYERS}..{MAX_PLAYERS}")
        if not 1 <= self.colors <= MAX_COLORS:
            bad("colors", f"must be in 1..{MAX_COLORS}")
        if not 1 <= self.ranks <= MAX_RANKS:
            bad("ranks", f"must be in 1..{MAX_RANKS}")
        if self.hand_size == 0:
            object.__setattr__(self, "hand_size", 5 if self.players <= 3 else 4)
        if self.hand_size < 1:
            bad("hand_size", "must be >= 1 (or 0 for the default)")
        if self.players * self.hand_size > self.num_cards:
            bad(
                "hand_size",
                f"{self.players} hands of {self.hand_size} need more than the {self.num_cards} cards",
            )
        if self.max_info_tokens < 1:
            bad("max_info_tokens", "must be >= 1")
        if self.max_life_tokens < 1:
            bad("max_life_tokens", "must be >= 1")
        if not isinstance(self.bomb_zero, bool):
            bad("bomb_zero", "must be a bool")

    # ---- cards -------------------------------------------------------------------------------
    @property
    def card_types(self) -> int:
        """Distinct cards (colour, rank); a card id is colour * ranks + rank."""
        return self.colors * self.ranks

    def copies(self, rank: int) -> int:
        """Copies of each card of this rank (HLE: 3 of the lowest, 1 of the highest, else 2)."""
        return 3 if rank == 0 else 1 if rank == self.ranks - 1 else 2

    @cached_property
    def card_counts(self) -> tuple[int, ...]:
        """Copies per card id."""
        return tuple(self.copies(r) for _ in range(self.colors) for r in range(self.ranks))

    @property
    def num_cards(self) -> int:
        return self.colors * sum(self.copies(r) for r in range(self.ranks))

    @property
    def max_score(self) -> int:
        return self.colors * self.ranks

    @property
    def max_deck_after_deal(self) -> int:
        """Cards left after the initial deal (length of the deck-size thermometer)."""
        return self.num_cards - self.players * self.hand_size

    @property
    def max_steps(self) -> int:
        """Upper bound on game length: every play/discard draws, hints are paid by tokens."""
        draws = self.max_deck_after_deal
        return draws + self.players + self.max_info_tokens + draws + self.players + self.colors

    @property
    def min_steps(self) -> int:
        """Lower bound on game length: losing every life, scoring everything, or playing out the deck."""
        return min(self.max_life_tokens, self.max_score, self.max_deck_after_deal + self.players)

    # ---- moves -------------------------------------------------------------------------------
    @property
    def num_moves(self) -> int:
        return 2 * self.hand_size + (self.players - 1) * (self.colors + self.ranks)

    @property
    def num_actions(self) -> int:
        """Moves plus a trailing no-op: the only action of a seat that is not to move (VDN acting)."""
        return self.num_moves + 1

    @cached_property
    def move_table(self) -> tuple[tuple[int, int, int, int, int], ...]:
        """Per move id: (type, slot, target offset, colour, rank); -1 where not applicable."""
        rows = [(DISCARD, s, -1, -1, -1) for s in range(self.hand_size)]
        rows += [(PLAY, s, -1, -1, -1) for s in range(self.hand_size)]
        rows += [(REVEAL_COLOR, -1, o, c, -1) for o in range(1, self.players) for c in range(self.colors)]
        rows += [(REVEAL_RANK, -1, o, -1, r) for o in range(1, self.players) for r in range(self.ranks)]
        return tuple(rows)

    def discard_move(self, slot):
        """Move id of discarding `slot` (an int or a tensor of them)."""
        return slot

    def play_move(self, slot):
        """Move id of playing `slot` (an int or a tensor of them)."""
        return self.hand_size + slot

    def color_hint_move(self, offset, color):
        """Move id of hinting colour `color` (0..C-1) to the player `offset` (1..P-1) seats after the mover
        (ints or tensors that broadcast)."""
        return 2 * self.hand_size + (offset - 1) * self.colors + color

    def rank_hint_move(self, offset, rank):
        """Move id of hinting rank index `rank` (0..R-1) to the player `offset` (1..P-1) seats after the
        mover (ints or tensors that broadcast)."""
        return 2 * self.hand_size + (self.players - 1) * self.colors + (offset - 1) * self.ranks + rank

    def move_name(self, move: int) -> str:
        """Human-readable move, in HLE's style."""
        if not 0 <= move < self.num_moves:
            return f"<invalid move {move}>"
        kind, slot, off, c, r = self.move_table[move]
        if kind == DISCARD:
            return f"(Discard {slot})"
        if kind == PLAY:
            return f"(Play {slot})"
        if kind == REVEAL_COLOR:
            return f"(Reveal player +{off} color {COLOR_CHARS[c]})"
        return f"(Reveal player +{off} rank {r + 1})"

    # ---- observation layouts -----------------------------------------------------------------
    @cached_property
    def layout(self) -> Layout:
        """HLE canonical observation, in its section order; sub-sections named 'section.part'."""
        p, h, ct = self.players, self.hand_size, self.card_types
        return Layout(
            (
                ("hands.cards", (p - 1) * h * ct),
                ("hands.missing", p),
                ("board.deck", self.max_deck_after_deal),
                ("board.fireworks", self.colors * self.ranks),
                ("board.info", self.max_info_tokens),
                ("board.lives", self.max_life_tokens),
                ("discards", sum(self.card_counts)),
                ("last_action.actor", p),  # who moved, relative to the observer
                ("last_action.type", len(MOVE_TYPES)),  # in LAST_ACTION_TYPE_ORDER
                ("last_action.target", p),  # hint target, relative to the observer
                ("last_action.color", self.colors),  # hinted colour
                ("last_action.rank", self.ranks),  # hinted rank
                ("last_action.reveal", h),  # slots the hint matched
                ("last_action.slot", h),  # slot played or discarded
                ("last_action.card", ct),  # card played or discarded
                ("last_action.scored", 1),  # a successful play
                ("last_action.info_gain", 1),  # a completed firework returned a hint token
                ("knowledge", p * h * (ct + self.colors + self.ranks)),
            )
        )

    @property
    def obs_dim(self) -> int:
        """Canonical observation size (658 / 956 / 1041 / 1280 for the full 2-5 player game)."""
        return self.layout.dim

    @property
    def public_dim(self) -> int:
        """Everything but other players' card identities (the public-LSTM input)."""
        return self.obs_dim - self.layout.slices["hands.cards"].stop

    @property
    def private_dim(self) -> int:
        """Public features plus the other players' hands: the full canonical observation."""
        return self.obs_dim

    # ---- interop -----------------------------------------------------------------------------
    def hle_params(self) -> dict[str, int]:
        """Parameters for hanabi_learning_environment.pyhanabi.HanabiGame."""
        return {
            "players": self.players,
            "colors": self.colors,
            "ranks": self.ranks,
            "hand_size": self.hand_size,
            "max_information_tokens": self.max_info_tokens,
            "max_life_tokens": self.max_life_tokens,
            "observation_type": 1,  # CARD_KNOWLEDGE
        }

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> GameConfig:
        return cls(**d)
