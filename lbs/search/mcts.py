"""MO-ISMCTS and RIS-MCTS (Goodman 2019), one tree per game, many games' searches in lockstep.

The tree is open loop: a node is the history of move ids since the root, so a drawn card never branches
and every player's decisions share one tree. Each iteration determinizes the searcher's (root player's)
hand and the deck from what the searcher observes, walks down the tree by UCT over scores scaled to
[0, 1] (moves illegal in this iteration's world are ignored), expands one untried legal move, plays the
game out with the simulation policy (uniformly random moves, or a blueprint's step such as SmartBot's) and
adds the final score to every node on the path. With a learned evaluation function (RIS-MCTS-NR, the
paper's section VI: lbs.search.mcts_value) the walk stops at the first node with an untried move instead,
every untried move there becomes a child valued by the function (one visit each), and the best value among
the node's moves is added to the path, with no simulation. RIS-MCTS also re-determinizes the hand (and the
deck) of every other player from that player's own information set when the walk enters its node
(ENTERNODE), and restores the hand it had when the walk leaves (EXITNODE, see `restore`).

Batched: trees are padded tensors per game (children indexed by move id, visit counts, value sums) and every
phase of an iteration (determinization, selection, expansion, simulation, back-propagation) is tensor
work over the games; Python loops run over iterations, tree depth and simulation steps only. Every random
number is a hashed counter of (the game's search key, iteration, purpose, depth, ...) (lbs.hanabi.rng),
so a plain per-game implementation reading the same counters makes the same moves (tests/search/test_mcts.py).

Hands are drawn exactly from the information set's posterior under a uniform deck (hints as 0/1
likelihoods, the counting weight of ExactRange), by rejection from a slot-by-slot proposal (`draw_hands`).
Shapes: G games, N nodes per tree, M moves, H hand slots, T card ids, K candidate hands per draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

import torch

from ..acting import Policy, greedy_moves
from ..belief.constraints import plausible_cards
from ..hanabi import engine
from ..hanabi.config import DISCARD, PLAY, GameConfig
from ..hanabi.rng import hash_keys, uniform
from ..hanabi.state import HanabiState
from ..models.qnet import state_batch_dim
from .config import MAX_COUNT, FieldError
from .mcts_rules import convention_marks, playable_cards, tree_moves

MctsMode = Literal["mo-ismcts", "ris-mcts"]
MCTS_MODES: tuple[str, ...] = get_args(MctsMode)
SimPolicy = Literal["random", "blueprint", "smartbot", "vandenbergh"]
"""MctsConfig.sim_policy's values (its flag offers them as choices)"""
SIM_POLICIES: tuple[str, ...] = get_args(SimPolicy)
RootChoice = Literal["mean", "visits"]
"""MctsConfig.root_choice's values"""
ROOT_CHOICES: tuple[str, ...] = get_args(RootChoice)

# what a hashed counter is for (its third component, after the game's key and the iteration)
DRAW, ACCEPT, DECK, EXPAND, ROLLOUT, REDRAW, FALLBACK = 1, 2, 3, 4, 5, 6, 7


@dataclass(frozen=True)
class MctsConfig:
    """One MCTS search per move for the player to move; the paper's settings where it gives them."""

    mode: MctsMode = "ris-mcts"
    """"mo-ismcts": determinize the searcher's hand once per iteration; "ris-mcts": also re-determinize
    each other player's hand from its own information set when the walk enters its node"""
    iterations: int = 100
    """iterations per move (the paper budgets time; an iteration count makes runs repeatable)"""
    exploration: float = 0.1
    """UCT's C over scores scaled to [0, 1] (the paper's best for both modes, from 0.01 .. 3)"""
    candidates: int = 32
    """hands proposed per determinization; the first the rejection step accepts is used (acceptance is
    high: see draw_hands). None accepted: the first proposal that fits, else a fallback draw that always
    fits (counted in MctsStats.inexact and fallback: then the draw is not exact)"""
    sim_policy: SimPolicy = "random"
    """how a simulation plays to the end: "random" (uniformly random legal moves, the paper's baseline),
    "blueprint" (the run's blueprint, greedy), or a rule bot by name ("smartbot", "vandenbergh": the paper's
    rule policy, lbs.bots.vandenbergh); the caller builds it
    (search takes it as a BlueprintPolicy)"""
    rule_moves: bool = False
    """restrict the tree's moves at every node to those of the paper's Table II rules
    (lbs.search.mcts_rules: at most nine, read from the mover's observation with the Van den Bergh helpers);
    the simulation is not restricted. Off: every legal move (the paper's first Table I section)"""
    convention: bool = False
    """the paper's 'playable now' convention: a hint touching one card of the next player says it is
    playable unless the receiver can tell it is not, so hints false under it are never taken in the tree,
    and the receiver's redrawn hand (and its rule chances) keep that card playable"""
    evaluation: str | None = None
    """an evaluation function file (train/mcts_value.py): the walk stops at the first node with an untried
    move, values its moves by the function from the mover's observation and backs up the best, with no
    simulation (RIS-MCTS-NR; sim_policy unused). None: a simulation to the end values each new node"""
    single_card_hint: bool = False
    """with rule_moves and the convention, one more rule first, as the paper's code has it (its Table II
    does not list it): hint the next player about a single playable card, its rank where no other card of
    that hand shares it, else its colour (lbs.search.mcts_rules.single_card_hint)"""
    root_choice: RootChoice = "mean"
    """the move made after the last iteration: "mean", the root child with the highest mean score (the
    paper's words, "the highest score"), or "visits", the most visited child (ties: the higher mean), as
    the paper's code chooses; a child tried once can have the highest mean by one lucky simulation"""
    rollout_depth: int = 0
    """moves a simulation plays before its score is read: the fireworks so far, as the paper's code scores a
    simulation it cuts (its default: 18 moves). 0: to the game's end"""
    tree_depth: int = 0
    """the deepest node a walk adds or enters; a walk that reaches it simulates from there (the paper's
    code: players x a multiplier + 1, its default multiplier 1, i.e. 5 with four players). 0: no limit"""

    def __post_init__(self) -> None:
        """Every field checked; FieldError (a ValueError) names the field, so an entry point names its
        flag."""
        if self.sim_policy not in SIM_POLICIES:
            raise FieldError("sim_policy", f"MctsConfig.sim_policy={self.sim_policy!r}: must be one of "
                             f"{', '.join(SIM_POLICIES)}")
        if self.single_card_hint and not (self.rule_moves and self.convention):
            raise FieldError("single_card_hint", "MctsConfig.single_card_hint adds a rule to Table II's "
                             "under the convention: it needs rule_moves and convention")
        if self.root_choice not in ROOT_CHOICES:
            raise FieldError("root_choice", f"MctsConfig.root_choice={self.root_choice!r}: must be one of "
                             f"{', '.join(ROOT_CHOICES)}")
        if self.mode not in MCTS_MODES:
            raise FieldError("mode", f"MctsConfig.mode={self.mode!r}: must be one of {', '.join(MCTS_MODES)}")
        for name in ("iterations", "candidates"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_COUNT:
                raise FieldError(name, f"MctsConfig.{name}={v!r}: must be an int in 1..{MAX_COUNT}")
        for name in ("rollout_depth", "tree_depth"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_COUNT:
                raise FieldError(name, f"MctsConfig.{name}={v!r}: must be an int in 0..{MAX_COUNT} (0: no "
                                 "limit)")
        if self.evaluation is not None and (self.rollout_depth or self.tree_depth):
            name = "rollout_depth" if self.rollout_depth else "tree_depth"
            raise FieldError(name, f"MctsConfig.{name}: a leaf valued by {self.evaluation} plays no "
                             "simulation and its walk stops at the first untried move; leave it out")
        if self.evaluation is not None and self.sim_policy != "random":
            raise FieldError("evaluation", f"MctsConfig.evaluation: a leaf valued by {self.evaluation} "
                             f"plays no simulation, so sim_policy {self.sim_policy!r} would be unused; "
                             "leave it out")
        if not 0 <= self.exploration < math.inf:
            raise FieldError("exploration", f"MctsConfig.exploration={self.exploration}: must be finite and "
                             ">= 0")


@dataclass
class MctsStats:
    """Counters of one search call, summed over its games (kept on the device during the search, read once
    at its end)."""

    draws: int = 0
    """determinizations made (root and re-determinizations)"""
    inexact: int = 0
    """of them, where no proposal was accepted (the first that fits, or the fallback draw, was used)"""
    fallback: int = 0
    """of those, where no proposal fit and the fallback draw (_fallback_hand) was used"""
    kept: int = 0
    """of them, where no hand fits the information set at all and the hand was left as it was (only in a
    world RIS-MCTS built: never at the root)"""
    exits: int = 0
    """RIS-MCTS: walks that left a re-determinized node by UCT (EXITNODE restored a hand)"""
    depth: list[int] = field(default_factory=list)
    """per game: the deepest node of its tree (the paper's decision depth is its mean)"""


@dataclass
class MctsResult:
    """What one search call decided, and the root statistics it decided on (for tests and diagnostics)."""

    move: torch.Tensor  # [G] the move chosen (MctsConfig.root_choice)
    visits: torch.Tensor  # [G, M] root children's visit counts
    value: torch.Tensor  # [G, M] float64 root children's summed scaled scores
    stats: MctsStats


# ---- determinization --------------------------------------------------------------------------------------
def _subsets(h: int, device: torch.device) -> torch.Tensor:
    """[2^h, h] bool: every subset of the hand's slots, one per row (Hall's condition runs over them)."""
    ids = torch.arange(2**h, device=device)
    return (ids[:, None] >> torch.arange(h, device=device)) & 1 == 1


def _fillable(allowed: torch.Tensor, left: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """[G, ...] whether the slots of mask `slots` [G, H] can all take distinct copies of what `left`
    [G, ..., T] holds, each slot a card allowed [G, H, T] (Hall's condition for a matching with capacities:
    every subset S of the slots sees at least |S| copies among the cards any of its slots allows)."""
    sub = _subsets(allowed.shape[1], allowed.device)  # [S, H]
    inside = sub[None] & slots[:, None, :]  # [G, S, H] the subset restricted to the slots to fill
    need = inside.sum(-1)  # [G, S]
    seen = (inside[..., None] & allowed[:, None]).any(2)  # [G, S, T] cards some slot of S allows
    g, extra = left.shape[0], left.shape[1:-1]  # candidate dims between G and T
    # one product per game (not per candidate): [G, X, T] x [G, T, S], exact in float64
    have = torch.bmm(left.reshape(g, -1, left.shape[-1]).double(), seen.transpose(1, 2).double())
    return (have.view(g, *extra, -1) >= need.view(g, *([1] * len(extra)), -1)).all(-1)


def _fallback_hand(game: GameConfig, allowed: torch.Tensor, unseen: torch.Tensor, held: torch.Tensor,
                   keys: torch.Tensor) -> torch.Tensor:
    """[G, H] a hand that fits whenever one does: slot by slot, a card with weight allowed x copies left,
    among the cards after which the later slots can still be filled (_fillable). Reads only what `allowed`,
    `unseen` and `held` say (the player's observations); random numbers uniform(keys, FALLBACK, slot)."""
    g, h, t = held.shape[0], game.hand_size, game.card_types
    dev = held.device
    left = unseen.clone()
    hand = torch.full((g, h), -1, dtype=torch.long, device=dev)
    slot_ids = torch.arange(h, device=dev)
    eye = torch.eye(t, dtype=torch.long, device=dev)
    u = uniform(keys[:, None], FALLBACK, slot_ids[None, :])  # [G, H]
    for s in range(h):
        on = held[:, s]
        later = held & (slot_ids > s)[None, :]  # [G, H]
        after = (left[:, None, :] - eye[None]).clamp(min=0)  # [G, T, T] copies left if card c goes here
        ok = _fillable(allowed, after, later)  # [G, T]
        w = allowed[:, s, :] * left * ok
        z = w.sum(-1)
        thr = torch.floor(u[:, s] * z.double()).long()
        pick = (w.cumsum(-1) > thr[:, None]).long().argmax(-1)
        take = on & (z > 0)
        hand[:, s] = torch.where(take, pick, -1)
        left = left - eye[pick] * take[:, None]
    return hand


FIRST_PROPOSALS = 4
"""draw_hands on the CPU: proposals made for every row first; the rest of MctsConfig.candidates only for the
rows none of these was accepted in (the same draws: proposal i's random numbers depend on i alone)."""


def _propose(allowed: torch.Tensor, unseen: torch.Tensor, held: torch.Tensor, keys: torch.Tensor,
             cand: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """draw_hands' proposals numbered `cand` [K] for each game: hands [G, K, H] (-1 where a slot found no
    card), whether each fits [G, K] and whether the rejection step accepts it [G, K]."""
    g, h, t = held.shape[0], held.shape[1], unseen.shape[1]
    k, dev = cand.numel(), held.device
    slot_ids = torch.arange(h, device=dev)
    u = uniform(keys[:, None, None], DRAW, cand[None, :, None], slot_ids[None, None, :])  # [G, K, H]
    left = unseen[:, None, :].expand(g, k, t).clone()  # [G, K, T]
    hands = torch.full((g, k, h), -1, dtype=torch.long, device=dev)
    prod_z = torch.ones(g, k, dtype=torch.long, device=dev)
    prod_max = torch.ones(g, k, dtype=torch.long, device=dev)
    fits = torch.ones(g, k, dtype=torch.bool, device=dev)
    for s in range(h):
        on = held[:, s, None]  # [G, 1]
        w = allowed[:, None, s, :] * left  # [G, K, T]
        z = w.sum(-1)  # [G, K]
        zmax = (allowed[:, s, :] * unseen).sum(-1)[:, None]  # [G, 1]
        thr = torch.floor(u[:, :, s] * z.double()).long()
        pick = (w.cumsum(-1) > thr[..., None]).long().argmax(-1)  # [G, K]
        ok = z > 0
        fits &= ~on | ok
        take = on & ok
        hands[:, :, s] = torch.where(take, pick, -1)
        left -= torch.nn.functional.one_hot(pick, t) * take[..., None]
        prod_z = torch.where(on, prod_z * z, prod_z)
        prod_max = torch.where(on, prod_max * zmax, prod_max)
    coin = uniform(keys[:, None], ACCEPT, cand[None, :])  # [G, K]
    return hands, fits, fits & (torch.floor(coin * prod_max.double()).long() < prod_z)


def draw_hands(game: GameConfig, state: HanabiState, player: torch.Tensor, keys: torch.Tensor,
               k: int, marked: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                    torch.Tensor]:
    """A hand [G, H] for `player` [G] drawn from what that player observes: its card knowledge (hints), its
    hand length and the copies it cannot see. Returns (hands, accepted [G], fits [G], possible [G]).

    Target: P(hand) proportional to the ways of dealing it from the unseen copies, prod over slots of the
    copies left (a uniform deck conditioned on the hints). Proposal: slot by slot, a card with weight
    allowed x copies left; its probability is prod copies_left / prod Z_s (Z_s: that slot's total weight).
    Accepting with probability prod Z_s / prod Zmax_s (Zmax_s: the slot's total weight before any slot took a
    card) makes the accepted hands exact draws from the target. Random numbers: uniform(keys, DRAW, cand,
    slot) and uniform(keys, ACCEPT, cand), keys [G]. None accepted: the first proposal that fits; none fits
    (the proposal can use up a card a later slot needed): `_fallback_hand`, which fits wherever any hand
    does (`possible`; false only in a world no hand fits, e.g. one EXITNODE left with incompatible cards:
    then the returned row is not a hand). The player's own cards are never read.
    """
    g, dev = state.batch_size, state.device
    rows = torch.arange(g, device=dev)
    unseen = engine.unseen_counts(game, state, player)  # [G, T]
    allowed = plausible_cards(game, state.color_plausible[rows, player], state.rank_plausible[rows, player])
    if marked is not None:
        sure = allowed & playable_cards(game, state)[:, None, :]  # [G, H, T]
        keep = marked & (sure & (unseen > 0)[:, None, :]).any(-1)
        allowed = torch.where(keep[..., None], sure, allowed)
    held = state.hands[rows, player] >= 0  # [G, H] the hand's length is public
    # on the CPU, where a host read is free, the later proposals only for the rows none of the first took
    first = min(k, FIRST_PROPOSALS) if dev.type == "cpu" else k
    cand = torch.arange(first, device=dev)
    hands, fits, accept = _propose(allowed, unseen, held, keys, cand)
    first_acc = torch.where(accept, cand, k).min(1).values  # [G]
    first_fit = torch.where(fits, cand, k).min(1).values
    out = hands[rows, torch.where(first_acc < k, first_acc, first_fit).clamp(max=first - 1)]
    if first < k:
        idx = (first_acc >= k).nonzero().squeeze(1)
        if idx.numel():
            more = torch.arange(first, k, device=dev)
            hands, fits, accept = _propose(allowed[idx], unseen[idx], held[idx], keys[idx], more)
            acc = torch.where(accept, more, k).min(1).values
            fit = torch.where(fits, more, k).min(1).values
            use = (acc < k) | ((first_fit[idx] >= k) & (fit < k))  # else the first fit stays
            at = (torch.where(acc < k, acc, fit).clamp(max=k - 1) - first).clamp(min=0)
            out[idx] = torch.where(use[:, None], hands[torch.arange(idx.numel(), device=dev), at], out[idx])
            first_acc[idx], first_fit[idx] = acc, torch.minimum(first_fit[idx], fit)
    short = first_fit >= k
    if dev.type == "cpu":  # the fallback for the rows that need it only
        idx = short.nonzero().squeeze(1)
        if idx.numel():
            out[idx] = _fallback_hand(game, allowed[idx], unseen[idx], held[idx], keys[idx])
    else:  # every row, with no host sync
        out = torch.where(short[:, None], _fallback_hand(game, allowed, unseen, held, keys), out)
    possible = _fillable(allowed, unseen, held)
    return out, first_acc < k, first_fit < k, possible


def determinize(game: GameConfig, state: HanabiState, player: torch.Tensor, keys: torch.Tensor, k: int,
                mask: torch.Tensor, tally: torch.Tensor | None = None,
                marked: torch.Tensor | None = None) -> HanabiState:
    """`state` with `player`'s [G] hand and the deck redrawn from that player's information set in the rows
    of mask [G] (engine.set_hand: the undealt cards are the unseen copies minus the hand, reshuffled with
    hash_keys(keys, DECK)). A row where no hand fits the information set keeps its hand and deck (never at
    the root: the searcher's true hand fits its own observations). tally [4] (device int64), when given,
    adds the rows drawn, not accepted, drawn by the fallback and kept (MctsStats' counters, no host sync).
    marked: slots the convention marks playable (draw_hands)."""
    hands, accepted, fits, possible = draw_hands(game, state, player, keys, k, marked)
    drawn = engine.set_hand(game, state, player, hands, hash_keys(keys, DECK))
    if tally is not None:
        ok = mask & possible
        tally += torch.stack([mask.sum(), (ok & ~accepted).sum(), (ok & ~fits).sum(),
                              (mask & ~possible).sum()])
    return drawn.where(mask & possible, state)


def restore(game: GameConfig, saved: HanabiState, after: HanabiState, mask: torch.Tensor) -> HanabiState:
    """EXITNODE: in rows of mask [G], the mover of `saved` (the world before its hand was re-determinized)
    gets that hand back in `after` (the world after its move on the re-determinized hand), so far as it can.

    A hint: hand and deck are exactly the saved ones. A play or discard of slot s: the saved hand without
    slot s, the card the saved deck would have drawn appended, the saved deck; the card really played or
    discarded (X, public now) and the saved card of slot s (Y) then differ in number by one copy each, so
    one copy of X left in the world (the undealt deck first, else the mover's hand, where it must be: X came
    from those cards) becomes Y, and every card's copies add up again. That slot's hints may not allow Y
    (the paper's 'incompatible cards'; its root player knows this world is not the real one)."""
    p, h, n = game.players, game.hand_size, game.num_cards
    g, dev = saved.batch_size, saved.device
    rows = torch.arange(g, device=dev)
    mover = saved.cur_player
    kind = engine.tables(game, dev).move_info[after.last_move.clamp(min=0), 0]
    pd = mask & ((kind == DISCARD) | (kind == PLAY))
    slot = engine.tables(game, dev).move_info[after.last_move.clamp(min=0), 1].clamp(min=0)
    old = saved.hands[rows, mover]  # [G, H]
    j = torch.arange(h, device=dev)
    src = j + (j >= slot[:, None]).long()  # [G, H] later slots move left
    shifted = torch.where(src < h, old.gather(1, src.clamp(max=h - 1)), -1)
    n_left = (old >= 0).sum(1) - 1
    drew = saved.deck_pos < n
    new_card = saved.deck.gather(1, saved.deck_pos.clamp(max=n - 1)[:, None]).squeeze(1)
    shifted = torch.where((j == n_left[:, None]) & drew[:, None], new_card[:, None], shifted)
    hand = torch.where(pd[:, None], shifted, old)
    deck = saved.deck.clone()
    x, y = after.last_card, old.gather(1, slot[:, None]).squeeze(1)
    fix = pd & (x != y)
    pos = torch.arange(n, device=dev)
    in_deck = (deck == x[:, None]) & (pos >= after.deck_pos[:, None])  # [G, N]
    d_at = torch.where(in_deck, pos, n).min(1).values
    use_deck = fix & (d_at < n)
    deck[rows, d_at.clamp(max=n - 1)] = torch.where(use_deck, y, deck[rows, d_at.clamp(max=n - 1)])
    h_at = torch.where(hand == x[:, None], j, h).min(1).values
    use_hand = fix & ~use_deck & (h_at < h)
    hand[rows, h_at.clamp(max=h - 1)] = torch.where(use_hand, y, hand[rows, h_at.clamp(max=h - 1)])
    pmask = (torch.arange(p, device=dev)[None, :] == mover[:, None])[:, :, None] & mask[:, None, None]
    return after.replace(hands=torch.where(pmask, hand[:, None, :], after.hands),
                         deck=torch.where(mask[:, None], deck, after.deck))


# ---- the search -------------------------------------------------------------------------------------------
@dataclass
class BlueprintPolicy:
    """A blueprint as the simulation policy (SmartBot, say): its step (or its state reader,
    acting.StatePolicy) and every seat's recurrent state [rows G * P] before reading the root's observation
    (as lbs.acting.play holds it), advanced along each walk so the simulation starts from the state the
    blueprint would have there."""

    q_fn: Policy
    hid: tuple


def _where_hid(mask: torch.Tensor, new: tuple, old: tuple, players: int) -> tuple:
    """Per game mask [G]: the recurrent state rows of `new` where true, of `old` elsewhere."""
    d = state_batch_dim(new)
    rows = mask.repeat_interleave(players)

    def pick(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        shape = [1] * a.dim()
        shape[d] = -1
        return torch.where(rows.view(shape), a, b)

    return type(new)(*(pick(a, b) for a, b in zip(new, old, strict=True)))


def uct_move(value: torch.Tensor, visits: torch.Tensor, parent: torch.Tensor, allowed: torch.Tensor,
             c: float) -> torch.Tensor:
    """[G] argmax over allowed [G, M] children of mean + c sqrt(ln N / n) (float64; ties: lowest id)."""
    n = visits.clamp(min=1).double()
    score = value / n + c * torch.sqrt(torch.log(parent.double())[:, None] / n)
    return torch.where(allowed, score, -math.inf).argmax(1)


def best_root_move(value: torch.Tensor, visits: torch.Tensor, by: RootChoice = "mean") -> torch.Tensor:
    """[G] the root child with the highest mean score (the paper's choice; ties: more visits, lower id), or
    by="visits" the most visited (ties: higher mean, lower id)."""
    tried = visits > 0
    mean = torch.where(tried, value / visits.clamp(min=1), -math.inf)
    if by == "visits":
        top = tried & (visits == visits.max(1, keepdim=True).values)
        return torch.where(top, mean, -math.inf).argmax(1)
    top = tried & (mean == mean.max(1, keepdim=True).values)
    most = torch.where(top, visits, -1)
    return most.argmax(1)


def random_legal(legal: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """[G] the floor(u * L)-th of the L legal moves of each row (legal [G, M], u [G] in [0, 1)): uniform."""
    nth = torch.floor(u * legal.sum(1).double()).long()
    return (legal.long().cumsum(1) > nth[:, None]).long().argmax(1)


CHECK_EVERY = 4
"""Engine steps between two host reads of whether any walk or simulation is still going (the one sync in
those loops; the steps in between are masked no-ops for the games that have stopped)."""


def _simulate(game: GameConfig, state: HanabiState, seeds: torch.Tensor, blueprint: BlueprintPolicy | None,
              hid: tuple | None, horizon: int) -> HanabiState:
    """Play every game to its end or for `horizon` moves: uniformly random legal moves (random_legal with
    uniform(seeds, t) at the t-th simulated move, all drawn at once) or the blueprint's greedy moves."""
    u = uniform(seeds[:, None], torch.arange(horizon, device=state.device))  # [G, horizon]
    for t in range(horizon):
        if t % CHECK_EVERY == 0 and bool(state.done.all()):
            break
        if blueprint is None:
            moves = random_legal(engine.legal_moves(game, state), u[:, t])
        else:
            moves, hid = greedy_moves(game, state, blueprint.q_fn, hid)
        state, _, _ = engine.step(game, state, moves)
    return state


LeafValues = Callable[[HanabiState], torch.Tensor]
"""RIS-MCTS-NR's evaluation: states [G] -> [G, M] float64, each move's value (scaled score) for the state's
mover, read from what the mover observes (lbs.search.mcts_value.EvalFn.leaf_values)."""


def _expand_all(child: torch.Tensor, visits: torch.Tensor, value: torch.Tensor, size: torch.Tensor,
                rows: torch.Tensor, base: torch.Tensor, new: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Make every move of new [G, M] a child of node rows [G] with one visit valued q [G, M] (in move order,
    numbered from size [G]); returns the new sizes."""
    ids = size[:, None] + new.long().cumsum(1) - 1  # [G, M]
    child[rows] = torch.where(new, ids, child[rows])
    at = (base[:, None] + ids)[new]
    visits[at] = 1
    value[at] = q[new]
    return size + new.sum(1)


@torch.no_grad()
def search(game: GameConfig, root: HanabiState, cfg: MctsConfig, keys: torch.Tensor,
           blueprint: BlueprintPolicy | None = None, evaluate: LeafValues | None = None) -> MctsResult:
    """One search per game for its player to move; keys [G] int64 name each game's random numbers (use a
    fresh key per decision). root: the real games (none finished); the searcher's own cards and the deck
    order are never read: every iteration redraws them from what the searcher observes. With `evaluate`
    the leaves are valued by it (RIS-MCTS-NR, no simulation; no blueprint then).

    Host syncs: one read of the games' move bound, one every CHECK_EVERY walk or simulation steps, and the
    counters at the end; none inside a step (on the CPU, where a host read is free, draw_hands also reads
    which rows need its later proposals and its fallback draw)."""
    if evaluate is not None and blueprint is not None:
        raise ValueError("search: a valued leaf (evaluate) plays no simulation; give no blueprint")
    g, m, dev = root.batch_size, game.num_moves, root.device
    nr = evaluate is not None
    cap = cfg.iterations * (m if nr else 1) + 1  # the nodes an iteration adds at most, plus the root
    child = torch.full((g * cap, m), -1, dtype=torch.long, device=dev)
    visits = torch.zeros(g * cap, dtype=torch.long, device=dev)
    value = torch.zeros(g * cap, dtype=torch.float64, device=dev)
    size = torch.ones(g, dtype=torch.long, device=dev)
    base = torch.arange(g, device=dev) * cap  # a game's node i is row base + i
    searcher = root.cur_player
    ris = cfg.mode == "ris-mcts"
    move_ids = torch.arange(m, device=dev)
    tally = torch.zeros(5, dtype=torch.long, device=dev)  # draws, inexact, fallback, kept, exits
    deepest = torch.zeros(g, dtype=torch.long, device=dev)
    everyone = torch.ones(g, dtype=torch.bool, device=dev)
    # public counts bound every game's remaining moves, the same in every determinization: walk + simulation
    horizon = int(engine.moves_left_bound(game, root).max())
    root_marks = convention_marks(game, root) if cfg.convention else None  # the searcher is the one to move
    walk = min(horizon, cfg.tree_depth or horizon)
    simulated = min(horizon, cfg.rollout_depth or horizon)
    for it in range(cfg.iterations):
        state = determinize(game, root, searcher, hash_keys(keys, it, REDRAW, 0), cfg.candidates, everyone,
                            tally[:4], root_marks)
        hid = blueprint.hid if blueprint is not None else None
        node = torch.zeros(g, dtype=torch.long, device=dev)
        path = [node]
        live = torch.ones(g, dtype=torch.bool, device=dev)
        valued = torch.zeros(g, dtype=torch.bool, device=dev)  # NR: the walk stopped at a node it valued
        leaf = torch.zeros(g, dtype=torch.float64, device=dev)
        # a walk adds one node below the tree's deepest, which iteration `it` has at depth `it` at most
        for depth in range(1, min(it + 1, walk) + 1):
            live = live & ~state.done
            if depth % CHECK_EVERY == 0 and not bool(live.any()):
                break
            mover = state.cur_player
            saved = state
            if ris:
                enter = live & (mover != searcher)
                marks = convention_marks(game, state) if cfg.convention else None
                state = determinize(game, state, mover, hash_keys(keys, it, REDRAW, depth), cfg.candidates,
                                    enter, tally[:4], marks)
            if blueprint is not None:  # every seat reads the state its mover decides in
                _, seen = greedy_moves(game, state, blueprint.q_fn, hid)
                hid = _where_hid(live, seen, hid, game.players)
            legal = tree_moves(game, state, cfg.rule_moves, cfg.convention, cfg.single_card_hint)
            kids = child.index_select(0, base + node)  # [G, M]
            untried = legal & (kids < 0)
            if nr:  # a node with an untried move: value them all and stop there
                stop = live & untried.any(1)
                q = evaluate(state)  # every row, though only `stop`'s are read: no host sync to pick them
                size = _expand_all(child, visits, value, size, base + node, base, untried & stop[:, None], q)
                kids = child.index_select(0, base + node)  # (the step below writes its row back)
                leaf = torch.where(stop, torch.where(legal, q, -math.inf).max(1).values, leaf)
                deepest = torch.where(stop, deepest.clamp(min=depth), deepest)  # its new children's depth
                valued, live = valued | stop, live & ~stop
                untried = untried & live[:, None]
            expand = live & untried.any(1)
            expand_keys = hash_keys(keys[:, None], it, EXPAND, depth, move_ids)
            fresh = torch.where(untried, expand_keys, -1).argmax(1)
            kid_rows = base[:, None] + kids.clamp(min=0)
            chosen = uct_move(value[kid_rows], visits[kid_rows], visits[base + node], legal & (kids >= 0),
                              cfg.exploration)
            move = torch.where(expand, fresh, chosen)
            stepped, _, _ = engine.step(game, state, move)
            state = stepped.where(live, state)
            if ris:
                leave = enter & live & ~expand  # (a walk that stopped at a valued node leaves nothing)
                state = restore(game, saved, state, leave)
                tally[4] += leave.sum()
            new = size.clone()
            child[base + node, move] = torch.where(expand, new, kids.gather(1, move[:, None]).squeeze(1))
            size = size + expand.long()
            nxt = torch.where(expand, new, kids.gather(1, move[:, None]).squeeze(1))
            node = torch.where(live, nxt, node)
            path.append(torch.where(live, nxt, -1))
            deepest = torch.where(live, torch.maximum(deepest, torch.full_like(deepest, depth)), deepest)
            live = live & ~expand
        if nr:  # a walk that did not stop at a valued node ended the game
            score = torch.where(valued, leaf, state.fireworks.sum(1).double() / game.max_score)
        else:
            final = _simulate(game, state, hash_keys(keys, it, ROLLOUT), blueprint, hid, simulated)
            score = final.fireworks.sum(1).double() / game.max_score  # points kept on the last life (paper)
        on = torch.stack(path, 1)  # [G, depth + 1]
        rows = (base[:, None] + on.clamp(min=0)).flatten()  # a path's padding adds 0 to its root
        visits.index_add_(0, rows, (on >= 0).long().flatten())
        value.index_add_(0, rows, (score[:, None] * (on >= 0)).flatten())
    kids = child.index_select(0, base)  # root children [G, M]
    kid_rows = base[:, None] + kids.clamp(min=0)
    v = torch.where(kids >= 0, visits[kid_rows], 0)
    w = torch.where(kids >= 0, value[kid_rows], 0.0)
    draws, inexact, fallback, kept, exits = tally.tolist()
    stats = MctsStats(draws, inexact, fallback, kept, exits, deepest.tolist())
    return MctsResult(best_root_move(w, v, cfg.root_choice), v, w, stats)
