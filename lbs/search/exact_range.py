"""SPARTA's exact belief ("range"): every hand the searcher might hold, with its exact probability.

Representation: the candidate hands of all games in one flat block sorted by game, `hands` [N, H]
int8 (card ids in slot order, -1 for empty slots) and `game` [N] long. A row is in the range iff it
agrees with the hints (HLE card knowledge, positive and negative), fits the copies the searcher cannot
see, and survived every counterfactual filter; rows failing any of these are deleted, so the range is
exactly the rows held. A hand's probability is proportional to its counting weight, the number of ways
to draw its cards in slot order from the copies the searcher cannot see (prod over slots of the unseen
copies left, a falling factorial per card id). By Bayes with a uniform deck that is the whole posterior
(the policy filter is 0/1 likelihood), so weights are recomputed from the current counts, never stored.

Events (update): hints to the searcher and every visible draw, discard or play only change the
knowledge and counts (rows that now contradict them are deleted); the searcher's own play or discard
keeps the rows holding the revealed card in that slot, shifts later slots left and appends every card
the draw could be; after a partner's move the counterfactual filter (range_filter) keeps the rows under
which that partner's blueprint makes the move it made. Each seat's public recurrent state is advanced
here from public features, as the lockstep loop does, and shared by every candidate. A blueprint without
the networks' public output (a rule bot such as SmartBot) is filtered through its whole step on every
candidate's observations and has its state advanced by that step (step_filter).

Deferred filters: every filter is a 0/1 predicate on the hand as it was at that move, so filters commute
with each other and with the cheap hint/count deletions. A partner filter is therefore stored (its shared
view, a few [G, ...] tensors) and applied when it is needed: before the searcher's own play or discard
(after keeping only the rows that held the revealed card, so on 1/T of the rows), and when samples or
sizes are asked for, but only for games whose rows already fit max_range. Early in the full game the
range has millions of rows (the searcher's first move filter would cost tens of seconds on a CPU); its
filters wait until hints or the searcher's own play shrink it, and run on far fewer rows then.
Meanwhile such a game is drawn from by rejection: OVERSAMPLE times the wanted hands are drawn from the
rows' counting weights and its pending filters run on those draws alone; the first k that pass are
exact draws from the posterior (the filters are 0/1 likelihoods), so search runs at every move, as the
paper's single-agent SPARTA does, at the cost of a few filters per drawn hand instead of per row.

Everything comes from what the searcher observes: its own canonical observation (counts, knowledge,
hand length) and the other players' cards; the searcher's true hand and the deck order are never read
(the `checked` invariant is the one exception).

Sizes: the full game's first moves have up to T^H (25^5 = 9.8 million) ordered hands; the range is
enumerated whenever that bound (product over slots of the cards still possible) is at most `max_enum`
(default 2^24, so every HLE default game), filtering and counting in chunks of `chunk` rows (by default
8,192 on a CPU, where a chunk's activations stay in cache: about 1.5-1.7x faster than 65,536; 262,144
on a GPU). A game
whose bound is larger at its deal (e.g. a 6-card hand) is not tracked at all: its samples are invalid
for the whole game and the search plays the blueprint there. A tracked game above `max_range` keeps
being updated and is drawn from by rejection; its size is then measured before its pending filters (an
upper bound), so a game whose filtered range would fit max_range may still wait for the next hint or own
play before its filters run on every row.
"""

from __future__ import annotations

import time

import torch

from ..belief.constraints import HandConstraints, from_obs, plausible_cards
from ..hanabi.config import DISCARD, PLAY, GameConfig
from ..hanabi.encode import encode
from ..hanabi.engine import tables
from ..hanabi.rng import uniform
from ..hanabi.state import HanabiState
from ..infer import QNetHandle
from ..models.qnet import select_rows
from .config import SearchConfig
from .range_filter import CandidatePolicy, PartnerView, blind
from .samplers import SampledHands, first_accepted
from .step_filter import StepPolicy, StepView, where_rows

MAX_ENUM = 1 << 24
"""Largest per-game bound on the range that is enumerated (25^5 full-game hands fit)."""
CPU_CHUNK, GPU_CHUNK = 8192, 262144
"""Default rows per filter and counting batch, per device (see the module doc)."""
OVERSAMPLE = 4
"""Hands drawn per wanted hand in a game above max_range, whose pending filters reject some of them
(early in the full game they keep about four rows in five)."""


class ExactRange:
    """The searcher's exact range in G games, updated after every real move (see the module doc)."""

    def __init__(self, game: GameConfig, net: QNetHandle, seat: int, max_range: int = SearchConfig.max_range,
                 chunk: int | None = None, checked: bool = False, max_enum: int = MAX_ENUM):
        caps = net.capabilities
        if not caps.public_state:
            raise ValueError("ExactRange needs a net whose recurrent state is public "
                             "(Capabilities.public_state)")
        if not 0 <= seat < game.players:
            raise ValueError(f"seat must be in 0..{game.players - 1}, got {seat}")
        self.game, self.net, self.seat = game, net, seat
        self.max_range, self.checked, self.max_enum = max_range, checked, max_enum
        self._chunk = chunk
        split = caps.public_split  # the networks: public output, then private layers
        self.policy = CandidatePolicy(game, net, seat) if split else StepPolicy(game, net, seat)
        self.filter_seconds = 0.0
        """time spent in counterfactual filters so far (they run deferred: in updates and draws)"""
        self.clock = time.perf_counter
        """the clock filter_seconds reads (a benchmark may set the thread's CPU clock)"""

    # ---- the searcher's view ---------------------------------------------------------------------------
    def _facts(self, state: HanabiState) -> tuple[HandConstraints, torch.Tensor]:
        """(constraints from the searcher's own observation, allowed cards per own slot [G, H, T])."""
        seat = torch.full((state.batch_size, 1), self.seat, dtype=torch.long, device=state.device)
        cons = from_obs(self.game, encode(self.game, state, observers=seat)[:, 0])
        return cons, plausible_cards(self.game, cons.color_plausible, cons.rank_plausible)

    # ---- public API ------------------------------------------------------------------------------------
    @torch.no_grad()
    def reset(self, state: HanabiState) -> None:
        """Start tracking G new games (state: the initial deal, batch G), from the searcher's view."""
        g, h, dev = state.batch_size, self.game.hand_size, state.device
        self.num_games, self.device = g, dev
        self.chunk = self._chunk or (CPU_CHUNK if dev.type == "cpu" else GPU_CHUNK)
        cons, plaus = self._facts(state)
        self.unseen = cons.unseen
        possible = (plaus & (cons.unseen > 0)[:, None, :]).sum(2).double()  # [G, H]
        held = torch.arange(h, device=dev) < cons.hand_len[:, None]
        bound = torch.where(held, possible, 1.0).prod(1)
        self.tracked = bound <= self.max_enum
        self.game_of = self.tracked.nonzero().flatten()  # one empty row per tracked game
        self.hands = torch.full((self.game_of.shape[0], h), -1, dtype=torch.int8, device=dev)
        for s in range(h):  # enumerate slot by slot, pruning as we go
            slot = torch.where(cons.hand_len.index_select(0, self.game_of) > s, s, -1)
            self._extend(slot, plaus[:, s] & (cons.unseen > 0))
            self._keep(self._consistent(plaus))
        self.plaus = plaus
        self._drawn: tuple | None = None  # _drawing's cache
        self.hid = self.net.initial_state(g * self.game.players)
        self.pending: list[tuple[PartnerView | StepView, torch.Tensor]] = []  # (view, games [G] to filter)
        if self.checked:
            self._check(state)

    @torch.no_grad()
    def update(self, before: HanabiState, move: torch.Tensor, after: HanabiState,
               unfiltered: torch.Tensor | None = None) -> None:
        """After one real move in every game (move [G], engine ids; games already over are ignored).
        unfiltered [G] bool: games whose partner move is not the blueprint's, so no blueprint filter is
        added for it (multi-agent SPARTA filters a searched move by replaying the search: joint_range)."""
        game, p, dev = self.game, self.game.players, before.device
        move = move.long()
        active = ~before.done
        mover = before.cur_player
        kind, slot = tables(game, dev).move_info[move.clamp(min=0)].unbind(1)[:2]
        # every seat's public state advances on `before` (as in acting.play); the mover's output is its view
        partner = active & (mover != self.seat) & self.tracked
        if unfiltered is not None:
            partner = partner & ~unfiltered
        filtering = bool(partner.any())  # one read of the host per move: a partner filter will wait
        if isinstance(self.policy, StepPolicy):
            blinded = blind(before, self.seat)
            hid = self._advance(blinded, active)
            if filtering:
                view = self.policy.view(blinded, self.hid, hid, mover, move)
        else:
            view, hid = self.policy.follow(before, self.hid, move, filtering)
        # the searcher's own play or discard: the card is revealed, a new one may be drawn
        cons, plaus = self._facts(after)
        own = active & (mover == self.seat) & ((kind == PLAY) | (kind == DISCARD))
        if bool(own.any()):
            self._own_card(own, slot, after.last_card, after.deck_pos > before.deck_pos, cons)
        # only what changed can rule rows out: a game's new hints, a card type with fewer unseen copies (one
        # type after a partner's draw, the common case: only rows holding more of it than are left fail), or
        # the searcher's own hand (every check)
        hinted = (plaus != self.plaus).flatten(1).any(1)
        fewer = cons.unseen < self.unseen  # [G, T]
        one = fewer.sum(1) == 1
        full = own | (fewer.any(1) & ~one)
        self.unseen, self.plaus = cons.unseen, plaus
        keep = self._consistent(plaus, full)
        keep &= self._consistent(plaus, hinted & ~full, counts=False)
        keep &= self._within(fewer.long().argmax(1), one & ~full)
        self._keep(keep)
        # partners: the counterfactual filter on the candidates that agree with everything else
        if filtering:
            self.pending.append((view, partner))
        self.hid = where_rows(active.repeat_interleave(p), hid, self.hid)
        if self.checked:
            self._check(after)

    @torch.no_grad()
    def sample(self, k: int, keys: torch.Tensor, games: torch.Tensor | None = None) -> SampledHands:
        """k hands per game drawn from the range's probabilities with hashed counters keyed by keys [G]
        (lbs.hanabi.rng, so the same keys give the same hands on any device). Integer weights and an
        integer cumulative sum keep the draw exact; the 32-bit uniform quantises it to 2^-32.
        Returns hands [G, k, H] long (-1 empty slots), valid [G, k] bool (False where the range is empty or
        not tracked, and, above max_range, past the draws its pending filters accepted: the first k of
        OVERSAMPLE * k draws that pass them). With games [G'] (the search's HandSampler call), keys are
        those games' [G'] and so are the results."""
        if games is not None:
            full = torch.zeros(self.num_games, dtype=torch.long, device=self.device)
            out = self.sample(k, full.index_copy(0, games.to(self.device), keys.to(self.device).long()))
            return SampledHands(out.hands.index_select(0, games), out.valid.index_select(0, games))
        g, dev = self.num_games, self.device
        size, cum, total = self._drawing()
        large = self.tracked & (size > self.max_range)  # pending filters: drawn by rejection
        m = k * OVERSAMPLE if bool(large.any()) else k  # the first k draws do not depend on m
        start = total.cumsum(0) - total
        u = uniform(keys.to(dev).long()[:, None], torch.arange(m, device=dev)[None, :])  # [G, m]
        target = start[:, None] + (u * total[:, None].double()).long()
        row = torch.searchsorted(cum, target, right=True).clamp(max=max(cum.shape[0] - 1, 0))
        ok = (self.tracked & (total > 0))[:, None].expand(g, m)
        if m > k:
            ok = ok & self._accepted(row, large)
        # the first k accepted draws of each game, in draw order
        first, valid = first_accepted(ok, k)
        row = row.gather(1, first)
        hands = self.hands
        if hands.shape[0] == 0:  # nothing to draw from anywhere: a dummy row, masked below
            hands = hands.new_full((1, self.game.hand_size), -1)
        out = hands.index_select(0, row.reshape(-1)).long().view(g, k, -1)
        return SampledHands(torch.where(valid[..., None], out, -1), valid)

    def _accepted(self, row: torch.Tensor, games: torch.Tensor) -> torch.Tensor:
        """[G, m] bool: the drawn rows row [G, m] pass every pending filter of their game, in games [G]
        bool (True elsewhere); the filters run on the draws only, each on those the earlier ones passed."""
        t0 = self.clock()
        g, m = row.shape
        game = torch.arange(g, device=self.device).repeat_interleave(m)
        flat = row.reshape(-1)
        ok = torch.ones(g * m, dtype=torch.bool, device=self.device)
        for view, todo in self.pending:
            idx = ((todo & games).index_select(0, game) & ok).nonzero().flatten()
            for r in idx.split(self.chunk):
                ok[r] = self.policy.made_move(view, self.hands.index_select(0, flat[r]).long(), game[r])
        self.filter_seconds += self.clock() - t0
        return ok.view(g, m)

    def _drawing(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(size [G], cumulative weights [N], total weight [G]) to draw from, pending filters of the games
        within max_range applied first; kept while the rows and counts stay the same objects (a search
        draws many rounds between two real moves; a real move replaces the counts, and every change of the
        rows replaces them, so an unchanged pair also means no filter is left to apply)."""
        if self._drawn is None or any(a is not b for a, b in zip(self._drawn[0], (self.hands, self.unseen),
                                                                  strict=True)):
            self._flush_small()
            size = torch.where(self.tracked, self.rows(), -1)
            w = self.weights(self.tracked)
            total = torch.zeros(self.num_games, dtype=torch.long, device=self.device)
            self._drawn = (self.hands, self.unseen), (size, w.cumsum(0), total.index_add_(0, self.game_of, w))
        return self._drawn[1]

    @torch.no_grad()
    def size(self) -> torch.Tensor:
        """[G] number of hands with positive probability (-1 for a game too large to track). Exact up to
        max_range; above it, an upper bound (the partner filters still pending, see the module doc)."""
        self._flush_small()
        return torch.where(self.tracked, self.rows(), -1)

    def weights(self, games: torch.Tensor | None = None) -> torch.Tensor:
        """[N] long counting weight of every row (unnormalised probability); with games [G] bool, of the rows
        of those games only (0 elsewhere)."""
        out = torch.zeros(self.hands.shape[0], dtype=torch.long, device=self.device)
        for r in self._row_chunks(games):
            out[r] = _ways(self.hands[r].long(), self.game_of[r], self.unseen)
        return out

    def _row_chunks(self, games: torch.Tensor | None) -> list:
        """The rows of games [G] bool (None: every row) in chunks of at most `chunk`: slices of the block,
        or index tensors when only some games are asked for (rows are sorted by game)."""
        n = self.hands.shape[0]
        if games is not None and not bool(games.any()):
            return []
        if games is None or bool(games.all()):
            return [slice(i, i + self.chunk) for i in range(0, n, self.chunk)]
        idx = games.index_select(0, self.game_of).nonzero().flatten()
        return list(idx.split(self.chunk))

    def probabilities(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(hands [N, H] long, game [N], probability [N] float64 within its game): the range as tensors,
        every pending filter applied whatever the size."""
        self._flush(self.tracked)
        w = self.weights().double()
        total = torch.zeros(self.num_games, dtype=torch.float64, device=self.device)
        total.index_add_(0, self.game_of, w)
        return self.hands.long(), self.game_of, w / total.index_select(0, self.game_of)

    def _advance(self, blind: HanabiState, active: torch.Tensor) -> tuple:
        """Every seat's shared state after reading `blind` (StepPolicy). Where a partner's state reads the
        searcher's cards (StepPolicy.advance), those games' pending filters run and the first hand left in
        the range stands in for the searcher's (every hand left makes the same read, see step_filter)."""
        hid, reads = self.policy.advance(blind, self.hid)
        reads = reads & active & self.tracked
        if not bool(reads.any()):  # a host sync per move, like the filters' own
            return hid
        self._flush(reads)
        if self.hands.shape[0] == 0:
            return hid
        count = self.rows()
        use = reads & (count > 0)
        first = (count.cumsum(0) - count).clamp(max=self.hands.shape[0] - 1)
        hid, _ = self.policy.advance(self._holding(blind, first, use), self.hid)
        if self.checked:  # test invariant: the last hand left gives the partners the same states
            last = (count.cumsum(0) - 1).clamp(min=0)
            other, _ = self.policy.advance(self._holding(blind, last, use), self.hid)
            p = self.game.players
            partners = ((torch.arange(p, device=blind.device) != self.seat).repeat(blind.batch_size)
                        & use.repeat_interleave(p)).nonzero().flatten()
            for a, b in zip(select_rows(hid, partners), select_rows(other, partners), strict=True):
                if not torch.equal(a, b):
                    raise RuntimeError(f"ExactRange(seat {self.seat}): hands left in the range give a "
                                       "partner different states; the shared state is not public")
        return hid

    def _holding(self, blind: HanabiState, row: torch.Tensor, games: torch.Tensor) -> HanabiState:
        """blind [G] with the searcher holding the range's row row[g] in the games [G] bool `games`."""
        return self.policy.with_hand(blind, self.hands.index_select(0, row).long(), games)

    # ---- the deferred counterfactual filters -----------------------------------------------------------
    def _flush(self, games: torch.Tensor) -> None:
        """Apply every pending partner filter to the rows of games [G] bool (in chunks of rows)."""
        t0 = self.clock()
        for i, (view, todo) in enumerate(self.pending):
            rows = (todo & games).index_select(0, self.game_of).nonzero().flatten()
            keep = torch.ones(self.hands.shape[0], dtype=torch.bool, device=self.device)
            for j in range(0, rows.numel(), self.chunk):
                r = rows[j : j + self.chunk]
                keep[r] = self.policy.made_move(view, self.hands.index_select(0, r).long(),
                                                self.game_of.index_select(0, r))
            self._keep(keep)
            self.pending[i] = (view, todo & ~games)
        self.pending = [(v, todo) for v, todo in self.pending if bool(todo.any())]  # a host sync: timed
        self.filter_seconds += self.clock() - t0

    def rows(self) -> torch.Tensor:
        """[G] rows held per game (an upper bound on the range while filters are pending)."""
        n = torch.zeros(self.num_games, dtype=torch.long, device=self.device)
        return n.index_add_(0, self.game_of, torch.ones_like(self.game_of))

    def _flush_small(self) -> None:
        """Flush the games whose rows already fit max_range; larger ones wait for hints to shrink them."""
        self._flush(self.tracked & (self.rows() <= self.max_range))

    # ---- row bookkeeping -------------------------------------------------------------------------------
    def _keep(self, keep: torch.Tensor) -> None:
        """Delete the rows where keep [N] is False (order is kept, so rows stay sorted by game)."""
        idx = keep.nonzero().flatten()
        if idx.numel() == keep.numel():  # nothing to delete: no copy of the block
            return
        self.hands, self.game_of = self.hands.index_select(0, idx), self.game_of.index_select(0, idx)

    def _extend(self, slot: torch.Tensor, allowed: torch.Tensor) -> None:
        """Replace each row whose slot [N] is >= 0 by one row per card allowed [G, T] in that slot. In chunks
        of rows: a grown row is card_types rows before the disallowed are dropped, and the index tensors of
        a whole range at once outgrow the memory the range itself needs."""
        t = self.game.card_types
        flat = allowed.flatten()
        hands, games = [], []
        for r in self._row_chunks(None):
            grow = slot[r] >= 0
            reps = torch.where(grow, t, 1)
            src = torch.repeat_interleave(torch.arange(grow.shape[0], device=self.device), reps)
            first = (reps.cumsum(0) - reps).index_select(0, src)
            card = torch.arange(src.shape[0], device=self.device) - first  # 0..T-1 within a grown row
            game, s = self.game_of[r].index_select(0, src), slot[r].index_select(0, src)
            h = self.hands[r].index_select(0, src)
            put, at = s >= 0, s.clamp(min=0)[:, None]
            h.scatter_(1, at, torch.where(put[:, None], card[:, None].to(h.dtype), h.gather(1, at)))
            ok = (~put | flat.index_select(0, game * t + card.clamp(max=t - 1))).nonzero().flatten()
            hands.append(h.index_select(0, ok))
            games.append(game.index_select(0, ok))
        if hands:
            self.hands, self.game_of = torch.cat(hands), torch.cat(games)

    def _own_card(self, own: torch.Tensor, slot: torch.Tensor, card: torch.Tensor, drew: torch.Tensor,
                  cons: HandConstraints) -> None:
        """The searcher played or discarded slot [G] holding card [G] in games own [G]: keep the rows that
        held it there, remove the slot (later slots shift left) and, where drew [G], add every new card."""
        h = self.game.hand_size
        mine = own.index_select(0, self.game_of)
        s = slot.clamp(min=0).index_select(0, self.game_of)  # hints have no slot (-1); those rows stay
        held = self.hands.gather(1, s[:, None]).squeeze(1).long()
        self._keep(~mine | (held == card.index_select(0, self.game_of)))
        self._flush(own)  # pending filters speak of the hand before the play: apply them on what is left
        mine, s = own.index_select(0, self.game_of), slot.clamp(min=0).index_select(0, self.game_of)
        hands = self.hands  # int8 throughout: the range's rows are its largest tensor
        j = torch.arange(h, device=self.device)
        after = torch.cat([hands[:, 1:], hands.new_full((hands.shape[0], 1), -1)], 1)
        self.hands = torch.where(mine[:, None] & (j >= s[:, None]), after, hands)  # successors move left
        new_slot = (cons.hand_len - 1).index_select(0, self.game_of)
        grow = (own & drew).index_select(0, self.game_of)
        self._extend(torch.where(grow, new_slot, -1), cons.unseen > 0)

    def _consistent(self, plaus: torch.Tensor, games: torch.Tensor | None = None, counts: bool = True
                    ) -> torch.Tensor:
        """[N] bool: the row fits the hints (plaus [G, H, T]) and (counts) the unseen counts; with games [G]
        bool, only those games' rows are checked (the others are kept)."""
        h, t = self.game.hand_size, self.game.card_types
        out = torch.ones(self.hands.shape[0], dtype=torch.bool, device=self.device)
        flat = plaus.flatten()
        j = torch.arange(h, device=self.device)
        for r in self._row_chunks(games):
            hands, game = self.hands[r].long(), self.game_of[r]
            ok = flat.index_select(0, ((game[:, None] * h + j) * t + hands.clamp(min=0)).flatten())
            ok = (ok.view(hands.shape) | (hands < 0)).all(1)
            out[r] = ok & (_ways(hands, game, self.unseen) > 0) if counts else ok
        return out

    def _within(self, card: torch.Tensor, games: torch.Tensor) -> torch.Tensor:
        """[N] bool: the row holds at most as many copies of card [G] as are unseen, in games [G] bool (the
        rows of other games are kept); the only count a partner's draw can break."""
        out = torch.ones(self.hands.shape[0], dtype=torch.bool, device=self.device)
        left = self.unseen.gather(1, card[:, None]).squeeze(1)  # [G]
        for r in self._row_chunks(games):
            game = self.game_of[r]
            held = (self.hands[r] == card.index_select(0, game)[:, None].to(self.hands.dtype)).sum(1)
            out[r] = held <= left.index_select(0, game)
        return out

    def _check(self, state: HanabiState) -> None:
        """The invariant (the only place that reads the true hand): it is in the range, weight > 0."""
        true = state.hands[:, self.seat].long()
        match = (self.hands.long() == true.index_select(0, self.game_of)).all(1) & (self.weights() > 0)
        found = torch.zeros(self.num_games, dtype=torch.long, device=self.device)
        found.index_add_(0, self.game_of, match.long())
        bad = self.tracked & (found == 0)
        if bool(bad.any()):
            games = bad.nonzero().flatten().tolist()[:8]
            raise RuntimeError(f"ExactRange(seat {self.seat}): the true hand left the range in games {games}")


def _ways(hands: torch.Tensor, game: torch.Tensor, unseen: torch.Tensor) -> torch.Tensor:
    """[n] long: ways to draw hands [n, H] in slot order from unseen [G, T] copies (0 if impossible)."""
    t = unseen.shape[1]
    flat = unseen.flatten()
    out = torch.ones(hands.shape[0], dtype=torch.long, device=hands.device)
    for s in range(hands.shape[1]):
        c = hands[:, s]
        before = (hands[:, :s] == c[:, None]).sum(1)
        left = flat.index_select(0, game * t + c.clamp(min=0)) - before
        out = out * torch.where(c >= 0, left.clamp(min=0), 1)
    return out
