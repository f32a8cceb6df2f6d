"""Retrospective multi-agent SPARTA for two players (SPARTA paper: "Multi-Agent Search", "Retrospective Belief
Updates", Algorithm 2) on a blueprint with an exact range (SmartBot, or a network with a public state).

Common knowledge. With two players a seat's private observation is its partner's hand, and every policy in
play (the blueprint, or the search, replayed) decides from the mover's view alone, so a move filters only the
hand the mover sees. The common-knowledge belief over both hands is therefore two public ranges
(`PublicRange`: ExactRange from the public card counts, the copies no one has seen, not those the seat cannot
see), each filtered by its partner's moves, joined by the card counts: a pair of hands is possible iff each is
in its seat's range and together they fit the copies no one has seen, with probability the ways to draw both.
A searcher's belief given the partner's hand h it sees is its own public range's hands that fit beside h, each
weighed by the ways to draw it from the unseen copies minus h: exactly SPARTA's private range (ExactRange).

Schedule (the paper's t*): every game keeps a queue of searched moves whose range-search has not run. A seat
searches when the queue is empty or holds its own moves; otherwise it plays the blueprint, and its move
filters its partner's range at once. After every move, the queue's front is range-searched once the range it
needs (the searcher's partner's hands as they were at that move, still possible now: chi_{t*,t}) holds at most
`max_range_joint` hands: the search at that move is replayed for every such hand h, batched (a hypothesis is
one more row of the search's game batch: its root with the partner holding h, the seats' states re-read on it,
the blueprint's move there, hands drawn from the searcher's range beside h), and the hands under which the
search made another move than the real one leave the partner's range. Then the next entry. With max range 0
nothing is ever replayed: the first mover searches every turn and the other plays the blueprint, single-agent
SPARTA.

chi_{t*,t} is read off the partner's range: a hand at t* is its cards still held (the first slots of the hand
now, in order: drawn cards go last) and the cards it has played or discarded since (public), so each row of
the range now maps to one hand at t* (`Pending.then`); rows are kept in lexicographic order (enumerated slot
by slot, filtered, a played slot removed, draws appended), so equal hands at t* are adjacent and the distinct
ones are counted in one pass. The count is exact once the range's deferred blueprint filters have run, which
ExactRange does for ranges within `max_range` rows; above that it is an upper bound and the replay may wait.

Drawing the searcher's hands (`JointSampler`): the same draw for the real search and for every replayed one, a
function of the common knowledge and the hand seen: with the searcher's range within `max_range` rows, the
exact weights' cumulative sum over the rows fitting beside h and ExactRange.sample's hashed uniforms (so the
draws equal single-agent SPARTA's); above it, draws from the public weights accepted with probability (ways
beside h) / (public ways) and by the range's pending filters, the first k of OVERSAMPLE * k kept.

Seats' states: a replay re-reads its root from the real seats' states before that move, which are public
while every hand left in a range makes the same reads of it. SmartBot's discard finesse is the one read of a
partner's cards (the discarder's state locates the card among its partner's newest), so with max range > 0 a
search never deviates to a discard that makes its mover read (`reading_moves`): it makes one only as the
blueprint's own move, which implies the blueprint filter, so that filter runs at once.

No peeking: the searcher's own cards are read nowhere; its search reads its range (public), the partner's hand
(seen) and the real state, whose own-hand cards the rollouts replace (engine.set_hand).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ..acting import QFunction, Turn, env_moves, greedy, play, seat_q
from ..graphs import Graphs
from ..hanabi import engine
from ..hanabi.config import DISCARD, PLAY, GameConfig
from ..hanabi.encode import encode
from ..hanabi.engine import card_histogram, tables
from ..hanabi.rng import hash_keys, uniform
from ..hanabi.state import HanabiState
from ..infer import QNetHandle
from ..models.qnet import select_rows
from ..seeding import Stream, game_seeds
from .agent import Decision, GameResult, Searcher, Tally, game_results
from .config import SearchConfig
from .exact_range import OVERSAMPLE, ExactRange, _ways
from .samplers import SampledHands, first_accepted

if TYPE_CHECKING:
    from .setup import SearchSetup

PAIRS = 1 << 21
"""(hypothesis, row) pairs weighed at once when drawing beside many hands (a memory cap; draws do not depend
on it)."""
ACCEPT = 0x5A17
"""Counter stream of the acceptance uniforms of draws above max_range (apart from the draws' own)."""


def public_unseen(game: GameConfig, state: HanabiState) -> torch.Tensor:
    """[G, T] copies no one has seen publicly: every copy minus the discards and the fireworks."""
    played = torch.arange(game.ranks, device=state.device) < state.fireworks[:, :, None]  # [G, C, R]
    return tables(game, state.device).card_counts[None, :] - state.discards - played.flatten(1).long()


class PublicRange(ExactRange):
    """A seat's hands consistent with the common knowledge: ExactRange counting the copies no one has seen
    (not the ones this seat cannot see), so both seats hold the same range of each seat."""

    def _facts(self, state: HanabiState):
        cons, plaus = super()._facts(state)
        return dataclasses.replace(cons, unseen=public_unseen(self.game, state)), plaus


@dataclass
class Snapshot:
    """A public range as a search read it (its tensors are replaced, never written, so holding them is
    free); its deferred filters applied where it fits max_range, as ExactRange draws."""

    hands: torch.Tensor  # [N, H] int8, rows sorted by game
    game_of: torch.Tensor  # [N]
    unseen: torch.Tensor  # [G, T] the public unseen copies then
    tracked: torch.Tensor  # [G] bool
    rows: torch.Tensor  # [G] rows per game
    start: torch.Tensor  # [G] first row of each game
    pending: list  # ExactRange.pending then (filters of games above max_range)
    rng: ExactRange  # the policy and chunk to run those filters with
    public: tuple | None = None  # (cumulative public weights [N], total [G]) for draws above max_range

    @classmethod
    def of(cls, rng: ExactRange) -> Snapshot:
        rng._flush_small()
        rows = rng.rows()
        return cls(rng.hands, rng.game_of, rng.unseen, rng.tracked, rows, rows.cumsum(0) - rows,
                   list(rng.pending), rng)

    def large(self) -> torch.Tensor:
        """[G] bool: games above max_range (drawn by rejection, their pending filters on the draws)."""
        return self.tracked & (self.rows > self.rng.max_range)

    def public_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.public is None:
            w = _ways(self.hands.long(), self.game_of, self.unseen)
            total = torch.zeros_like(self.rows).index_add_(0, self.game_of, w)
            self.public = (w.cumsum(0), total)
        return self.public


class JointSampler:
    """Hands of a searcher beside the partner hands `other` [n, H] it sees (hypotheses; row i of game
    game[i]), from its public range `snap`: the HandSampler a Searcher draws from (see the module doc)."""

    def __init__(self, snap: Snapshot, game: torch.Tensor, other: torch.Tensor):
        self.snap, self.game, self.other = snap, game, other.long()

    def reset(self, state: HanabiState) -> None:
        pass

    def update(self, before: HanabiState, move: torch.Tensor, after: HanabiState) -> None:
        pass

    def sample(self, k: int, keys: torch.Tensor, games: torch.Tensor) -> SampledHands:
        """k hands for each hypothesis in `games` [n'] (indices into this sampler's rows), keyed by keys
        [n']."""
        snap = self.snap
        g = self.game.index_select(0, games)
        n, dev, t = g.shape[0], g.device, snap.unseen.shape[1]
        seen = card_histogram(self.other.index_select(0, games), t)
        beside = snap.unseen.index_select(0, g) - seen  # [n, T] the copies left beside each seen hand
        large = snap.large().index_select(0, g)
        m = k * OVERSAMPLE if bool(large.any()) else k  # the first k draws do not depend on m
        u = uniform(keys.long()[:, None], torch.arange(m, device=dev)[None, :])  # [n, m]
        row = torch.zeros(n, m, dtype=torch.long, device=dev)
        ok = torch.zeros(n, m, dtype=torch.bool, device=dev)
        small = (~large).nonzero().flatten()
        count = snap.rows.index_select(0, g)
        for part in _split_pairs(small, count):
            r, a = self._exact(part, g, count, beside, u)
            row[part], ok[part] = r, a
        big = large.nonzero().flatten()
        if big.numel():
            row[big], ok[big] = self._rejection(big, g, beside, u, keys.long())
        ok &= snap.tracked.index_select(0, g)[:, None]
        first, valid = first_accepted(ok, k)
        row = row.gather(1, first)
        hands = snap.hands if snap.hands.shape[0] else snap.hands.new_full((1, snap.hands.shape[1]), -1)
        out = hands.index_select(0, row.reshape(-1)).long().view(n, k, -1)
        return SampledHands(torch.where(valid[..., None], out, -1), valid)

    def _exact(self, part: torch.Tensor, g: torch.Tensor, count: torch.Tensor, beside: torch.Tensor,
               u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows [p, m], drawn [p, m]) of hypotheses `part`: ExactRange.sample's draw over the rows that fit
        beside each hypothesis' hand (the others weigh 0, so they are never drawn)."""
        snap, dev = self.snap, part.device
        cnt = count.index_select(0, part)
        pair = torch.repeat_interleave(torch.arange(part.shape[0], device=dev), cnt)  # hypothesis of a pair
        first = (cnt.cumsum(0) - cnt).index_select(0, pair)
        rows = snap.start.index_select(0, g.index_select(0, part)).index_select(0, pair) \
            + torch.arange(pair.shape[0], device=dev) - first  # [pairs] the snapshot's rows
        w = _ways(snap.hands.index_select(0, rows).long(), pair, beside.index_select(0, part))
        total = torch.zeros(part.shape[0], dtype=torch.long, device=dev).index_add_(0, pair, w)
        start = total.cumsum(0) - total
        target = start[:, None] + (u.index_select(0, part) * total[:, None].double()).long()
        at = torch.searchsorted(w.cumsum(0), target, right=True).clamp(max=max(pair.shape[0] - 1, 0))
        drawn = rows.index_select(0, at.flatten()).view(at.shape) if pair.shape[0] else torch.zeros_like(at)
        return drawn, (total > 0)[:, None].expand_as(at)

    def _rejection(self, big: torch.Tensor, g: torch.Tensor, beside: torch.Tensor, u: torch.Tensor,
                   keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, accepted) of hypotheses `big` whose range is above max_range: drawn by the public weights,
        kept with probability (ways beside the hand) / (public ways) and where the pending filters pass."""
        snap = self.snap
        cum, total = snap.public_weights()
        gb = g.index_select(0, big)
        tot = total.index_select(0, gb)
        start = (total.cumsum(0) - total).index_select(0, gb)
        target = start[:, None] + (u.index_select(0, big) * tot[:, None].double()).long()
        row = torch.searchsorted(cum, target, right=True).clamp(max=max(cum.shape[0] - 1, 0))  # [b, m]
        b, m = row.shape
        flat, game = row.flatten(), gb.repeat_interleave(m)
        hands = snap.hands.index_select(0, flat).long()
        hyp = torch.arange(b, device=big.device).repeat_interleave(m)
        mine = _ways(hands, hyp, beside.index_select(0, big)).double()
        public = _ways(hands, game, snap.unseen).double()
        u2 = uniform(hash_keys(keys.index_select(0, big), ACCEPT)[:, None],
                     torch.arange(m, device=big.device))
        ok = (u2.flatten() * public < mine) & (tot > 0).repeat_interleave(m)
        for view, todo in snap.pending:  # ExactRange._accepted on these draws
            idx = (todo.index_select(0, game) & ok).nonzero().flatten()
            for r in idx.split(snap.rng.chunk):
                ok[r] = snap.rng.policy.made_move(view, hands.index_select(0, r), game.index_select(0, r))
        return row, ok.view(b, m)


def reading_moves(game: GameConfig, handle: QNetHandle, state: HanabiState, hid: tuple) -> torch.Tensor:
    """[G, M] bool: the mover's discards after which its own state would read its partner's cards (SmartBot's
    discard finesse: Capabilities.reads_hands), asked of the blueprint on each discard made in `state`; hid:
    the seats' states after reading `state`. A public question (the mover's knowledge of its own card)."""
    g, p, m = state.batch_size, game.players, game.num_moves
    out = torch.zeros(g, m, dtype=torch.bool, device=state.device)
    if not handle.capabilities.reads_hands:
        return out
    mover = state.cur_player
    legal = engine.legal_moves(game, state)
    rows = select_rows(hid, torch.arange(g, device=state.device) * p + mover)
    for slot in range(game.hand_size):  # a loop over the few discard moves
        move = torch.full((g,), slot, dtype=torch.long, device=state.device)  # discard ids come first
        after, _, _ = engine.step(game, state, torch.where(legal[:, slot], move, 0))
        obs = encode(game, after, observers=mover[:, None])[:, 0].float()
        with handle.borrowed() as module:
            out[:, slot] = legal[:, slot] & module.reads_hands(obs, rows)
    return out


def _split_pairs(idx: torch.Tensor, count: torch.Tensor) -> list[torch.Tensor]:
    """idx [n] split into consecutive parts of about PAIRS (hypothesis, row) pairs at most (by where each
    hypothesis' pairs end; one larger than PAIRS is a part of its own)."""
    if not idx.numel():
        return []
    part = (count.index_select(0, idx).cumsum(0) - 1).clamp(min=0) // PAIRS
    return list(idx.split(torch.unique_consecutive(part, return_counts=True)[1].tolist()))


@dataclass
class Pending:
    """Searched moves made at one step whose range-search waits (the paper's actionQ entries, one step's
    games at once: in lockstep every game has the same mover)."""

    step: int
    seat: int
    """the searcher; its partner's range is the one the replay filters"""
    games: torch.Tensor  # [G] bool: games where it still waits
    move: torch.Tensor  # [G] the move made
    root: HanabiState  # [G] the state it was made in
    hid: tuple  # the seats' states before reading root (rows g * P + p)
    belief: Snapshot  # the searcher's public range then
    kept: torch.Tensor  # [G, H] long: the partner's slot then -> its slot now (-1: gone, or empty then)
    gone: torch.Tensor  # [G, H] long: the card that left a slot since (-1: still held, or empty then)

    def then(self, hands: torch.Tensor, game_of: torch.Tensor) -> torch.Tensor:
        """[N, H] long: the partner's hand at `step` of each row (its hand now) of the partner's range."""
        kept = self.kept.index_select(0, game_of)
        now = hands.long().gather(1, kept.clamp(min=0))
        return torch.where(kept >= 0, now, self.gone.index_select(0, game_of))

    def played(self, games: torch.Tensor, slot: torch.Tensor, card: torch.Tensor) -> None:
        """The partner played or discarded slot [G] (card [G]) in games [G] bool: that slot is gone."""
        at = games[:, None] & (self.kept == slot[:, None])
        self.gone = torch.where(at, card[:, None], self.gone)
        self.kept = torch.where(at, -1, torch.where(games[:, None] & (self.kept > slot[:, None]),
                                                   self.kept - 1, self.kept))


def distinct_then(entry: Pending, hands: torch.Tensor, game_of: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(hands at the entry's step [N, H], new [N] bool: the row starts a run of equal ones) of the partner's
    range rows hands [N, H], game_of [N], sorted so that equal hands at the step are adjacent."""
    then = entry.then(hands, game_of)
    new = torch.ones(then.shape[0], dtype=torch.bool, device=then.device)
    if then.shape[0] > 1:
        new[1:] = (then[1:] != then[:-1]).any(1) | (game_of[1:] != game_of[:-1])
    return then, new


def count_then(entry: Pending, rng: ExactRange, chunk: int = 1 << 20) -> torch.Tensor:
    """[G] distinct hands at the entry's step among the partner's range rows (chi_{t*,t}), in chunks of rows
    (a memory cap: the full game's ranges hold millions of rows)."""
    count = torch.zeros(entry.games.shape[0], dtype=torch.long, device=entry.games.device)
    n = rng.hands.shape[0]
    for a in range(0, n, chunk):
        lo = max(a - 1, 0)  # one row of overlap: a run may cross the chunk boundary
        _, new = distinct_then(entry, rng.hands[lo: a + chunk], rng.game_of[lo: a + chunk])
        new, game = (new[1:], rng.game_of[a: a + chunk]) if a else (new, rng.game_of[: chunk])
        count.index_add_(0, game, new.long())
    return count


@dataclass
class RangeSearch:
    """One replayed search (the test's and the record's view): the hands replayed and the moves found."""

    step: int
    seat: int
    at: int  # the move after which it ran
    game: torch.Tensor  # [n] batch index of each hypothesis
    hands: torch.Tensor  # [n, H] the partner's hand it assumed
    moves: torch.Tensor  # [n] the search's move there
    count: torch.Tensor  # [n] rollouts spent on it


@dataclass
class JointSearch:
    """Multi-agent SPARTA for a batch of G games (acting.play's override and hook; see the module doc)."""

    game: GameConfig
    cfg: SearchConfig
    q_fn: QFunction
    handle: QNetHandle
    searchers: list[Searcher]
    ranges: list[ExactRange]
    ids: torch.Tensor
    checked: bool = False
    """test invariant: after every replay each true hand is still in its seat's range"""
    queue: list[Pending] = field(default_factory=list)
    decisions: list[tuple[int, Decision]] = field(default_factory=list)
    replays: list[RangeSearch] = field(default_factory=list)
    last_hid: tuple | None = None
    hid_before: tuple | None = None  # the seats' states before reading this step's state
    belief: Snapshot | None = None  # the searcher's range as this step's search read it
    searched: torch.Tensor | None = None  # [G] bool: games searched at this step
    reading: torch.Tensor | None = None  # [G] bool: of those, games whose move made the mover read (filtered)

    @classmethod
    def of(cls, setup: SearchSetup, ids: torch.Tensor, seed: int, graphs: Graphs | None = None,
           checked: bool = False) -> JointSearch:
        game, cfg = setup.game, setup.cfg
        searchers = [Searcher(game, setup.playout, None, dataclasses.replace(cfg, seat=s), None, seed,
                              setup.timing, graphs) for s in range(game.players)]
        ranges = [PublicRange(game, setup.blueprint, s, max_range=cfg.max_range, checked=checked)
                  for s in range(game.players)]
        return cls(game, cfg, setup.q_fn, setup.blueprint, searchers, ranges, ids, checked)

    def reset(self, state: HanabiState, hid: tuple) -> None:
        for r in self.ranges:
            r.reset(state)
        self.last_hid = hid

    def waiting(self, seat: int) -> torch.Tensor:
        """[G] bool: games with a searched move of `seat` whose range-search waits."""
        out = torch.zeros(self.ids.shape[0], dtype=torch.bool, device=self.ids.device)
        for e in self.queue:
            if e.seat == seat:
                out |= e.games
        return out

    def override(self, t: int, state: HanabiState, hid: tuple, blueprint: torch.Tensor) -> torch.Tensor:
        """The moves at step t: searched where the mover may search (the queue is empty or its own)."""
        before, self.last_hid = self.last_hid, hid
        self.hid_before = before
        live = ~state.done
        self.searched = torch.zeros_like(live)
        self.reading = self.searched
        if not bool(live.any()):
            return blueprint
        mover = int(state.cur_player[live.nonzero()[0, 0]])  # lockstep: one mover in every live game
        go = live & ~self.waiting(1 - mover)
        self.searched = go
        if not bool(go.any()):
            return blueprint
        where = go.nonzero().flatten()
        self.belief = Snapshot.of(self.ranges[mover])
        sampler = JointSampler(self.belief, torch.arange(state.batch_size, device=state.device),
                               state.hands[:, 1 - mover])  # the partner's hand: what the mover sees
        searcher = self.searchers[mover]
        searcher.sampler = sampler
        reads = reading_moves(self.game, self.handle, state, hid)
        if self.cfg.max_range_joint == 0:  # nothing is replayed: the partner's range is never read
            reads = torch.zeros_like(reads)
        dec = searcher.decide(state, where, hid, blueprint, t, self.ids, allowed=_allowed(reads, blueprint))
        self.decisions.append((t, dec))
        moves = blueprint.index_copy(0, where, dec.move)
        self.reading = go & reads.gather(1, moves[:, None]).squeeze(1)
        return moves

    def follow(self, t: int, before: HanabiState, move: torch.Tensor, after: HanabiState) -> None:
        """After the move at step t: both ranges updated (a searched move adds no blueprint filter), the
        waiting entries follow the partner's plays, this step's search joins the queue, and the queue is
        resolved."""
        searched = self.searched if self.searched is not None else torch.zeros_like(before.done)
        mover = before.cur_player
        for r in self.ranges:  # a move that made its mover read is the blueprint's own: filtered at once too
            r.update(before, move, after, unfiltered=searched & ~self.reading)
        kind, slot = tables(self.game, before.device).move_info[move.long().clamp(min=0)].unbind(1)[:2]
        gone = ~before.done & ((kind == PLAY) | (kind == DISCARD))
        for e in self.queue:  # the entry's partner moved: a card it held then may have left
            e.played(gone & (mover != e.seat), slot, after.last_card.long())
        if bool(searched.any()):
            seat = int(mover[searched.nonzero()[0, 0]])
            h = self.game.hand_size
            slots = torch.arange(h, device=before.device).expand(before.batch_size, h)
            full = before.hands[:, 1 - seat] >= 0  # which slots are held is public
            self.queue.append(Pending(t, seat, searched.clone(), move.long(), before, self.hid_before,
                                      self.belief, torch.where(full, slots, -1), torch.full_like(slots, -1)))
        self.resolve(t, after)

    def resolve(self, t: int, state: HanabiState) -> None:
        """Range-search every queue front whose range fits max_range_joint, front after front."""
        mr = self.cfg.max_range_joint
        if mr == 0 or not self.queue:
            return
        earlier = torch.zeros_like(self.queue[0].games)
        for e in self.queue:
            front = e.games & ~earlier
            if bool(front.any()):
                rng = self.ranges[1 - e.seat]
                rng._flush_small()
                go = front & rng.tracked & (count_then(e, rng) <= mr)
                if bool(go.any()):
                    self._replay(e, go, rng, t, state)
                    e.games = e.games & ~go
            earlier = earlier | e.games
        self.queue = [e for e in self.queue if bool(e.games.any())]

    def _replay(self, e: Pending, go: torch.Tensor, rng: ExactRange, t: int, state: HanabiState) -> None:
        """Replay e's search for every distinct partner hand then of the games go [G] (batched: one Searcher
        batch of hypotheses), and drop the rows under which it made another move."""
        game, p, j = self.game, self.game.players, 1 - e.seat
        rows_go = go.index_select(0, rng.game_of).nonzero().flatten()  # the rows of go's games
        then, new = distinct_then(e, rng.hands.index_select(0, rows_go), rng.game_of.index_select(0, rows_go))
        run = new.long().cumsum(0) - 1  # [R] each row's hypothesis
        pick = new.nonzero().flatten()
        hyp = then.index_select(0, pick)  # [n, H]
        hg = rng.game_of.index_select(0, rows_go.index_select(0, pick))  # [n]
        root = e.root.index(hg)
        mine = (torch.arange(p, device=hyp.device) == j)[None, :, None]
        root = root.replace(hands=torch.where(mine, hyp[:, None, :].to(root.hands.dtype), root.hands))
        rows = (hg[:, None] * p + torch.arange(p, device=hg.device)).reshape(-1)
        _, legal, q, hid = seat_q(game, root, self.q_fn, select_rows(e.hid, rows))
        blueprint = env_moves(game, root, greedy(q, legal.reshape(q.shape[0], -1)).reshape(-1, p))
        searcher = self.searchers[e.seat]
        searcher.sampler = JointSampler(e.belief, hg, hyp)
        n = hg.shape[0]
        allowed = _allowed(reading_moves(game, self.handle, root, hid), blueprint)
        dec = searcher.decide(root, torch.arange(n, device=hg.device), hid, blueprint, e.step,
                              self.ids.index_select(0, hg), allowed=allowed)
        moves = dec.move.to(hg.device)
        agree = moves == e.move.index_select(0, hg)  # [n]
        if self.checked:  # test invariant: the runs are the distinct hands (rows sorted, see the module doc)
            keyed = torch.cat([rng.game_of.index_select(0, rows_go)[:, None], then], 1)
            if torch.unique(keyed, dim=0).shape[0] != n:
                raise RuntimeError("joint_range: equal hands at a searched move are not adjacent")
        keep = torch.ones(rng.hands.shape[0], dtype=torch.bool, device=hg.device)
        keep[rows_go] = agree.index_select(0, run)  # a row stays where its hand then made the real move
        rng._keep(keep)
        self.replays.append(RangeSearch(e.step, e.seat, t, hg.cpu(), hyp.cpu(), moves.cpu(),
                                        dec.count.sum(1)))
        if self.checked:
            rng._check(state)


def _allowed(reads: torch.Tensor, blueprint: torch.Tensor) -> torch.Tensor:
    """[G, M] the moves a search may play: never a move that makes its mover read the partner's cards unless
    it is the blueprint's own (then every hand left in the partner's range makes the same read: the blueprint
    filter implies it, so that filter runs at once and the shared states stay public)."""
    ids = torch.arange(reads.shape[1], device=reads.device)
    return ~reads | (ids[None, :] == blueprint[:, None])


def play_batch(setup: SearchSetup, ids: torch.Tensor, seed: int, graphs: Graphs | None, tally: Tally | None,
               checked: bool = False, out: list | None = None) -> list[GameResult]:
    """The games `ids` with both seats searching (agent.play_batch's multi-agent counterpart); `out` gets the
    JointSearch (tests read its replays)."""
    game = setup.game
    g_n = ids.shape[0]
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, g_n, int(ids[0]), setup.device))
    deck = state.deck.cpu()
    hid = setup.initial_state(g_n * game.players)
    joint = JointSearch.of(setup, ids, seed, graphs, checked)
    joint.reset(state, hid)
    if out is not None:
        out.append(joint)
    moves: list[torch.Tensor] = []
    key = object()
    if tally is not None:
        tally.start(key, g_n, int(engine.moves_left_bound(game, state).sum()))

    def follow(turn: Turn) -> bool:
        joint.follow(turn.t, turn.state, turn.move, turn.next_state)
        moves.append(torch.where(turn.state.done, -1, turn.move))
        if tally is not None:
            tally.step(key, int((~turn.state.done).sum()), int(joint.searched.sum()),
                       int(engine.moves_left_bound(game, turn.next_state).sum()))
        return bool(turn.next_state.done.all())

    final, _ = play(game, state, setup.q_fn, hid, game.max_steps, hook=follow, override=joint.override)
    if tally is not None:
        tally.finish(key, g_n)
    results = game_results(game, deck, torch.stack(moves, 1).cpu(), final, joint.decisions)
    return _with_replays(results, joint.replays)


def _with_replays(results: list[GameResult], replays: list[RangeSearch]) -> list[GameResult]:
    """Each decision dict gains its seat and, once replayed, when and over how many hands; a game's rollouts
    count its replays' too (the paper's rollouts per game)."""
    for rp in replays:
        for i in rp.game.unique().tolist():
            mine = rp.game == i
            spent = int(rp.count[mine].sum())
            res = results[i]
            res.rollouts += spent
            for d in res.decisions:
                if d["step"] == rp.step:
                    d.update(range_hands=int(mine.sum()), range_rollouts=spent, replayed_at=rp.at)
    for res in results:
        for d in res.decisions:
            d.setdefault("seat", d["step"] % 2)
    return results
