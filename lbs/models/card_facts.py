"""What the card counts say, as extra inputs of a Q-network (NetConfig.counting, hint_facts, discard_facts).

A rule bot such as SmartBot decides with facts a network must otherwise learn to compute from one-hot
bits: is this card playable now, already useless (played, or a lower rank of its colour is gone), the
last copy of a card still needed? And for a card known only by its hints: how likely is each of those,
given which copies nobody has seen yet (the V0 belief: hint-plausible cards weighted by unseen copies)?

Every fact is a function of the canonical observation, so search, acting and training compute them the
same way from what they already hold. `public_facts` reads only public features (the public LSTM's input:
board, discards, every player's hint knowledge); `private_facts` adds what the observer's view of the
other hands says (their cards' facts, and the observer's own slots under the copies it cannot see);
`hint_facts` what each hint the observer could give would say; `discard_facts` which card each player
discards next by SmartBot's rule and what the cards the observer sees there are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from ..bots.smartbot import discard_slot
from ..hanabi.config import GameConfig, Layout
from ..hanabi.engine import tables

FACTS = 3
"""Per card: playable now, useless (never playable again), the last copy of a card still needed."""


Sections = tuple[tuple[str, int], ...]
"""Named sections of a network's input (a Layout's), in order: (name, size)."""


def public_sections(game: GameConfig) -> Sections:
    """public_facts: FACTS per card id, then FACTS per slot of every hand (observer first)."""
    slots = FACTS * game.players * game.hand_size
    return (("counts.cards", FACTS * game.card_types), ("counts.slots", slots))


def private_sections(game: GameConfig) -> Sections:
    """private_facts: FACTS per own slot (under the copies the observer cannot see), then per slot of the
    other hands (the cards it sees)."""
    seen = FACTS * (game.players - 1) * game.hand_size
    return (("counts.own", FACTS * game.hand_size), ("counts.seen", seen))


def _size(sections: Sections) -> int:
    return sum(n for _, n in sections)


def public_dim(game: GameConfig) -> int:
    """Size of public_facts."""
    return _size(public_sections(game))


def private_dim(game: GameConfig) -> int:
    """Size of private_facts."""
    return _size(private_sections(game))


def _public(game: GameConfig, publ: torch.Tensor, name: str) -> torch.Tensor:
    """A section of the canonical observation read from public features [..., public_dim]."""
    off, sl = game.layout.slices["hands.cards"].stop, game.layout.slices[name]
    return publ[..., sl.start - off : sl.stop - off]


class Board(NamedTuple):
    """What the public features say about the cards, which every fact is built from."""

    status: torch.Tensor  # [..., T, FACTS] float: per card id playable / useless / last copy
    left: torch.Tensor  # [..., T] float: copies not yet discarded or played
    know: torch.Tensor  # [..., P, H, T] float: plausible cards per slot of every hand (observer first)


def board(game: GameConfig, publ: torch.Tensor) -> Board:
    """The Board of public features [..., public_dim] (an observation's public part: `public_of`)."""
    tb, c, r, t = tables(game, publ.device), game.colors, game.ranks, game.card_types
    lead = publ.shape[:-1]
    x = publ.float()
    top = _public(game, x, "board.fireworks").reshape(*lead, c, r)  # one-hot of the top card per colour
    played = top.flip(-1).cumsum(-1).flip(-1).reshape(*lead, t)  # 1 where the card's rank is on the board
    discarded = torch.zeros(*lead, t, device=publ.device)
    discarded.index_add_(-1, tb.instance_card, _public(game, x, "discards"))  # thermometer per card id
    counts = tb.card_counts.float()
    gone = (discarded >= counts) & (played == 0)  # every copy discarded before it was played
    dead = gone.reshape(*lead, c, r).byte().cummax(-1).values.reshape(*lead, t).bool()  # it or a lower rank
    height = (top * torch.arange(1, r + 1, device=publ.device)).sum(-1).long()  # [..., C] played per colour
    playable = (height[..., tb.card_color] == tb.card_rank) & ~dead
    useless = (played > 0) | dead
    last = ~useless & (counts - discarded == 1)
    status = torch.stack([playable.float(), useless.float(), last.float()], -1)
    h, ct = game.hand_size, t + c + r
    know = _public(game, x, "knowledge").reshape(*lead, game.players, h, ct)[..., :t]
    return Board(status, counts - discarded - played, know)


def public_of(game: GameConfig, obs: torch.Tensor) -> torch.Tensor:
    """The public features inside canonical observations [..., obs_dim] (everything after the hands)."""
    return obs[..., game.layout.slices["hands.cards"].stop :]


def _expect(know: torch.Tensor, left: torch.Tensor, status: torch.Tensor) -> torch.Tensor:
    """Per slot [..., S, FACTS]: the facts' chances under the V0 belief (plausible x unseen copies)
    of slots know [..., S, T] with unseen copies left [..., T] (an empty slot: zeros)."""
    w = know * left.clamp(min=0)[..., None, :]
    w = w / w.sum(-1, keepdim=True).clamp(min=1e-9)
    return w @ status


def public_facts(game: GameConfig, publ: torch.Tensor, bd: Board | None = None) -> torch.Tensor:
    """[..., public_dim(game)] float from public features [..., game.public_dim] (bd: their Board, where
    already computed)."""
    status, left, know = board(game, publ) if bd is None else bd
    slots = _expect(know.flatten(-3, -2), left, status)  # [..., P*H, FACTS]
    return torch.cat([status.flatten(-2), slots.flatten(-2)], -1)


def own_view(game: GameConfig, obs: torch.Tensor, bd: Board | None = None) -> tuple[torch.Tensor, ...]:
    """What private_facts is made of, from observations [..., obs_dim]: (status [..., T, FACTS], copies the
    observer cannot see [..., T], its own slots' plausible cards [..., H, T], the cards it sees
    [..., (P-1)*H, T] one-hot), all float. SPARTA's filter builds the facts of candidate hands from these."""
    status, left, know = board(game, public_of(game, obs)) if bd is None else bd
    lead, t, h = obs.shape[:-1], game.card_types, game.hand_size
    cards = game.layout.view(obs, "hands.cards").float().reshape(*lead, (game.players - 1) * h, t)
    return status, left - cards.sum(-2), know[..., 0, :, :], cards


def private_facts(game: GameConfig, obs: torch.Tensor, bd: Board | None = None) -> torch.Tensor:
    """[..., private_dim(game)] float from canonical observations [..., game.obs_dim]: the observer's own
    slots' facts under the copies it cannot see, then the facts of the cards it sees, slot by slot."""
    status, unseen, know, cards = own_view(game, obs, bd)
    own = _expect(know, unseen, status)  # [..., H, FACTS]
    return torch.cat([own.flatten(-2), (cards @ status).flatten(-2)], -1)


HINT_FACTS = 8
"""Per partner and hint: touched cards, of them playable / useless / last copies, slots it shows playable,
identities it rules out, and whether the newest slot it leaves possibly playable is playable (or not)."""


def hint_sections(game: GameConfig) -> Sections:
    """hint_facts: HINT_FACTS per (other player, hint), colours then ranks, as the moves."""
    return (("hints", HINT_FACTS * (game.players - 1) * (game.colors + game.ranks)),)


def hint_dim(game: GameConfig) -> int:
    """Size of hint_facts."""
    return _size(hint_sections(game))


class HintKnowledge(NamedTuple):
    """What the other players' hint knowledge says before any card is read: per slot the plausible
    identities (a copy left) that are playable / not, and of those the ones each hint's card type matches.
    Shapes [..., Q, H, 1] and [..., Q, H, N] (Q: the other players from the observer on). SPARTA's filter
    reads the searcher's slots from it with candidate cards."""

    yes: torch.Tensor
    no: torch.Tensor
    yes_hit: torch.Tensor
    no_hit: torch.Tensor


def hint_knowledge(game: GameConfig, obs: torch.Tensor, bd: Board | None = None) -> HintKnowledge:
    """HintKnowledge of canonical observations [..., obs_dim] (bd: their Board, where already computed):
    sums over card types as matmuls."""
    status, left, know = board(game, public_of(game, obs)) if bd is None else bd
    plausible = know[..., 1:, :, :] * (left > 0).float()[..., None, None, :]  # [..., Q, H, T]
    playable = status[..., None, None, :, 0]  # [..., 1, 1, T]
    yes, no = plausible * playable, plausible * (1 - playable)
    hint = tables(game, obs.device).card_features[1:].float()  # [T, N]: the hints each card id matches
    return HintKnowledge(yes.sum(-1, keepdim=True), no.sum(-1, keepdim=True), yes @ hint, no @ hint)


def hint_facts_of(game: GameConfig, kn: HintKnowledge, touched: torch.Tensor,
                  card_status: torch.Tensor) -> torch.Tensor:
    """[..., Q, N, HINT_FACTS] from HintKnowledge kn, which slots each hint touches touched [..., Q, H, N]
    (float 0/1) and the slots' card facts card_status [..., Q, H, FACTS] (zeros: no card)."""
    h, t = game.hand_size, game.card_types
    # a touched slot keeps the hint's identities, an untouched one the others
    yes_after = torch.where(touched > 0, kn.yes_hit, kn.yes - kn.yes_hit)
    no_after = torch.where(touched > 0, kn.no_hit, kn.no - kn.no_hit)
    may_play, may_after = kn.yes > 0, yes_after > 0
    shows = may_play & (kn.no > 0) & may_after & (no_after == 0)  # now surely playable, not before
    ruled_out = kn.yes + kn.no - yes_after - no_after  # [..., Q, H, N]
    per_hint = touched.transpose(-1, -2) @ card_status / h  # [..., Q, N, F]: the touched cards' facts
    open_ = touched.bool() & may_play & may_after  # the slots the hint leaves possibly playable
    slot = torch.arange(h, device=touched.device)[:, None]
    newest = torch.where(open_, slot, -1).max(-2).values  # [..., Q, N] the newest such slot, -1: none
    is_playable = torch.gather(card_status[..., 0], -1, newest.clamp(min=0)).bool() & (newest >= 0)
    return torch.cat([touched.sum(-2)[..., None] / h, per_hint, torch.stack([
        shows.float().sum(-2) / h, ruled_out.sum(-2) / (h * t), is_playable.float(),
        ((newest >= 0) & ~is_playable).float()], -1)], -1)


def hint_facts(game: GameConfig, obs: torch.Tensor, bd: Board | None = None) -> torch.Tensor:
    """[..., hint_dim(game)] float from canonical observations [..., obs_dim]: what each hint the observer
    could give would say to its target, read from the target's hint knowledge (plausible cards with a copy
    left) and the cards the observer sees there. Slot counts are divided by the hand size, ruled-out
    identities by hand size x card types. A rule bot's hint choice is a function of these (SmartBot: show
    a playable card, rule out the most); a network would otherwise learn them from one-hot bits."""
    bd = board(game, public_of(game, obs)) if bd is None else bd
    lead, h, t = obs.shape[:-1], game.hand_size, game.card_types
    cards = game.layout.view(obs, "hands.cards").float().reshape(*lead, game.players - 1, h, t)
    touched = cards @ tables(game, obs.device).card_features[1:].float()  # [..., Q, H, N]
    kn = hint_knowledge(game, obs, bd)
    return hint_facts_of(game, kn, touched, cards @ bd.status[..., None, :, :]).flatten(-3)


def discard_sections(game: GameConfig) -> Sections:
    """discard_facts: per slot of every hand (observer first) whether it is that player's next discard, then
    per other player FACTS of the card there."""
    return (("discards.next", game.players * game.hand_size), ("discards.seen", (game.players - 1) * FACTS))


def discard_dim(game: GameConfig) -> int:
    """Size of discard_facts."""
    return _size(discard_sections(game))


def next_discards(game: GameConfig, bd: Board) -> torch.Tensor:
    """[..., P, H] float one-hot (zeros: none) of the slot each player discards next by SmartBot's rule
    (smartbot.discard_slot), read from public knowledge alone (hint-plausible identities with a copy not yet
    played or discarded). Public, so the same for every hand a player might hold."""
    plausible = bd.know * (bd.left > 0).float()[..., None, None, :]  # [..., P, H, T]
    n = plausible.sum(-1)  # identities per slot; an empty slot: 0
    share = plausible @ bd.status[..., None, :, :] / n.clamp(min=1)[..., None]  # [..., P, H, F]
    sure = (share[..., 0] == 1) | (share[..., 1] == 1)
    slot = discard_slot(n > 0, sure, share[..., 2] == 1, share[..., 1])
    return (torch.arange(game.hand_size, device=slot.device) == slot[..., None]).float()


def discard_facts(game: GameConfig, obs: torch.Tensor, bd: Board | None = None) -> torch.Tensor:
    """[..., discard_dim(game)] float from canonical observations [..., obs_dim]: every player's next
    discard (next_discards) and, for the other players, whether the card there is playable / useless / a
    last copy (SmartBot warns a partner about to discard a last copy; it discards its own next-discard slot
    when nothing better is left)."""
    bd = board(game, public_of(game, obs)) if bd is None else bd
    lead, h, t = obs.shape[:-1], game.hand_size, game.card_types
    chop = next_discards(game, bd)  # [..., P, H]
    cards = game.layout.view(obs, "hands.cards").float().reshape(*lead, game.players - 1, h, t)
    there = (chop[..., 1:, :, None] * (cards @ bd.status[..., None, :, :])).sum(-2)  # [..., P-1, F]
    return torch.cat([chop.flatten(-2), there.flatten(-2)], -1)


# ---- the network's input: the observation, then each family of facts a NetConfig switches on --------------
class Family(NamedTuple):
    """One family of facts in a network's input. A new family is one entry of FAMILIES (and its NetConfig
    switch): the network's input, its layout and SPARTA's filter follow from it (a family the filter does not
    know is filtered through the network's whole private pass, exactly, only slower)."""

    switch: str
    """the NetConfig field that feeds it"""
    sections: Callable[[GameConfig], Sections]
    """its named sections of the input, in order"""
    facts: Callable[[GameConfig, torch.Tensor, Board], torch.Tensor]
    """(game, x, its Board) -> [..., its size] float; x: public features if `public`, else observations"""
    public: bool = False
    """read from public features alone: the public network reads it too, and it precedes the private
    families in the private network's input"""


FAMILIES: tuple[Family, ...] = (
    Family("counting", public_sections, public_facts, public=True),
    Family("counting", private_sections, private_facts),
    Family("hint_facts", hint_sections, hint_facts),
    Family("discard_facts", discard_sections, discard_facts),
)
"""Every family, in input order (public families first)."""


def families(switches: object) -> tuple[Family, ...]:
    """The families a config switches on (switches: a NetConfig, or anything with its boolean fields)."""
    return tuple(f for f in FAMILIES if getattr(switches, f.switch))


def input_layout(game: GameConfig, fams: tuple[Family, ...]) -> Layout:
    """The private network's input by name: the canonical observation's sections as 'obs.<name>' (the group
    'obs' spans it), then each family's sections."""
    return Layout(tuple((f"obs.{name}", n) for name, n in game.layout.sections)
                  + tuple(sec for f in fams for sec in f.sections(game)))


def public_input_dim(game: GameConfig, fams: tuple[Family, ...]) -> int:
    """Width of the public network's input: the public features, then the public families' facts."""
    return game.public_dim + sum(_size(f.sections(game)) for f in fams if f.public)


def public_input(game: GameConfig, fams: tuple[Family, ...], publ: torch.Tensor,
                 bd: Board | None = None) -> torch.Tensor | None:
    """The public families' facts [..., F] of public features [..., public_dim] in their dtype (None if no
    family is public): one computation serves both networks of a step."""
    public = [f for f in fams if f.public]
    if not public:
        return None
    bd = board(game, publ) if bd is None else bd
    return torch.cat([f.facts(game, publ, bd).to(publ.dtype) for f in public], -1)


def network_input(game: GameConfig, fams: tuple[Family, ...], obs: torch.Tensor,
                  public: torch.Tensor | None = None) -> torch.Tensor:
    """The private network's input (input_layout) from observations [..., obs_dim], in their dtype; public:
    the public families' facts where already computed from the same step (public_input)."""
    if not fams:
        return obs
    bd = board(game, public_of(game, obs))  # shared by every family
    if public is None:
        public = public_input(game, fams, public_of(game, obs), bd)
    rest = [f.facts(game, obs, bd).to(obs.dtype) for f in fams if not f.public]
    return torch.cat([obs, *([] if public is None else [public]), *rest], -1)
