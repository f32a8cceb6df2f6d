"""BAD's factorised Bayesian belief over the searcher's own hand (Foerster et al. 2019), as a hand sampler.

Per held slot i a distribution over the card identities c, built from three public factors the searcher
reads off its own observation and the partners' moves:
- C(c): the copies of c it cannot see (undealt or in its own hand), the global factor;
- HM(i, c): what the hints (positive and negative) allow in slot i, narrowed, with `knowledge`, to what a
  rule bot's public card knowledge allows (as the learned belief's sampler does);
- L(i, c): the likelihood of every partner move so far given slot i holds c. At a partner's move, S hands
  are drawn from the current belief and the partner's blueprint is asked, for each, whether it makes the
  move it made (SPARTA's counterfactual filter, range_filter.CandidatePolicy, on the drawn hands only);
  L(i, c) is multiplied by the share of the draws holding c in slot i under which it does (BAD's eq. 8),
  shrunk towards the slot's average share by SHRINK pseudo-draws (a card drawn a few times gets no noisy
  0 or 1; one never drawn gets the average). Where no draw makes the move, the move leaves L unchanged.
  The searcher's own play or discard removes that slot's factor (later slots shift left; a new card starts
  at 1).
The self-consistent belief iterates B(i, c) ~ max(C(c) - sum_{j != i} B(j, c), 0) HM(i, c) [L(i, c)]
(eq. 12: V1 without L; eq. 14: the Bayesian belief with it) from B ~ C HM [L]. Hands are drawn slot by slot
from the marginals, independently, and kept only where they fit the counts (as BAD's training did: the first
k of OVERSAMPLE * k draws). The belief needs no training and follows any network blueprint's conventions:
its only knowledge of them is the blueprint itself.

Where we differ from the paper: the policy is the blueprint's greedy move (a 0/1 likelihood, within Q_TOL, as
SPARTA's filter; `temperature` > 0 gives a softmax, which measured no better), and the shares are shrunk
(BAD's ratio is plain, with 3,000-20,000 draws); the stabilising mix-in is the grounded V0 belief (C x HM),
not V1 (BAD: V2 = 0.99 BB + 0.01 V1), because V1 can give a possible card zero weight (C(c) = 1 with other
slots' beliefs summing to 1), while V0 is positive for every card the hints and counts allow, the true card
included, so no draw is ruled out for good.

Everything comes from what the searcher observes (its own observation, the public states and the partners'
moves, the partners' view built with its cards hidden); the draws are keyed by a hash of that observation,
so the belief is a function of the searcher's history alone.
"""

from __future__ import annotations

import torch

from ..belief import factorised
from ..belief.constraints import from_obs, plausible_cards
from ..belief.sampling import valid_hands
from ..blueprint import CardKnowledge
from ..hanabi.config import DISCARD, PLAY, GameConfig
from ..hanabi.encode import encode
from ..hanabi.engine import tables
from ..hanabi.rng import hash32, hash_keys
from ..hanabi.state import HanabiState
from ..infer import QNetHandle
from .range_filter import CandidatePolicy
from .samplers import SampledHands, first_accepted
from .step_filter import where_rows

SAMPLES = 4_000
"""hands drawn per game at each partner move to estimate the likelihood (BAD: 3,000 in training, 20,000 in
its test games); the estimate's noise compounds over the moves (module doc)"""
ITERATIONS = 10
"""self-consistency iterations (eqs. 12 and 14; BAD trained with 100)"""
MIX = 0.01
"""share of the grounded V0 belief mixed into the Bayesian one (BAD's alpha)"""
SHRINK = 2.0
"""pseudo-draws at the slot's average chance added to every (slot, card)'s draws: a card drawn a few times
in a slot gets a ratio near the average, not a noisy 0 or 1"""
TEMPERATURE = 0.0
"""the partner's policy as the likelihood sees it: 0, its greedy move (a 0/1 likelihood, as SPARTA's filter);
above 0, the softmax of its Q-values over this temperature"""
OVERSAMPLE = 4
"""draws per wanted hand: a draw whose slots together use more copies than are unseen is rejected"""
CHUNK = 8192
"""candidate hands per filter batch"""
KINDS = factorised.KINDS
"""the beliefs `marginals` gives: grounded (C x HM), self-consistent, and Bayesian with the V0 mix-in"""


class BayesBelief:
    """The searcher's factorised Bayesian belief in G games, updated after every real move (module doc)."""

    def __init__(self, game: GameConfig, net: QNetHandle, seat: int, knowledge: CardKnowledge | None = None,
                 samples: int = SAMPLES, iterations: int = ITERATIONS, mix: float = MIX,
                 temperature: float = TEMPERATURE, shrink: float = SHRINK):
        if not net.capabilities.public_split:
            raise ValueError("the Bayesian belief asks the partner's blueprint about drawn hands through the "
                             "networks' public/private split (Capabilities.public_split); this blueprint has "
                             "none: draw from the learned belief instead")
        if not 0 <= seat < game.players:
            raise ValueError(f"seat must be in 0..{game.players - 1}, got {seat}")
        self.game, self.net, self.seat, self.knowledge = game, net, seat, knowledge
        self.samples, self.iterations, self.mix, self.temperature = samples, iterations, mix, temperature
        self.shrink = shrink
        self.policy = CandidatePolicy(game, net, seat)

    # ---- following the game ----------------------------------------------------------------------------
    @torch.no_grad()
    def reset(self, state: HanabiState) -> None:
        g, dev = state.batch_size, state.device
        self.loglike = torch.zeros(g, self.game.hand_size, self.game.card_types, dtype=torch.float64,
                                   device=dev)
        """[G, H, T] log L(i, c): -inf where a partner's move ruled the card out of the slot"""
        self.hid = self.net.initial_state(g * self.game.players)
        self.known = None if self.knowledge is None else \
            self.knowledge.initial_state(g, dev, seat=self.seat)
        self._observe(state)

    @torch.no_grad()
    def update(self, before: HanabiState, move: torch.Tensor, after: HanabiState) -> None:
        """After one real move in every game (move [G]; games already over are ignored)."""
        move = move.long()
        active = ~before.done
        partner = active & (before.cur_player != self.seat)
        filtering = bool(partner.any())  # one host read per move, as the exact range's
        view, hid = self.policy.follow(before, self.hid, move, filtering)
        if filtering:  # the belief as it was before the move is what the move is weighed against
            self._weigh(view, partner.nonzero().flatten())
        kind, slot = tables(self.game, move.device).move_info[move.clamp(min=0)].unbind(1)[:2]
        own = active & (before.cur_player == self.seat) & ((kind == PLAY) | (kind == DISCARD))
        self.loglike = factorised.drop_slot(self.loglike, own, slot)  # shift left; a new card: L = 1
        self.hid = where_rows(active.repeat_interleave(self.game.players), hid, self.hid)
        self._observe(after)

    def _observe(self, state: HanabiState) -> None:
        """The searcher's counts, hints (and knowledge) from its own observation of `state`."""
        seat = torch.full((state.batch_size, 1), self.seat, device=state.device)
        obs = encode(self.game, state, observers=seat)[:, 0]
        self.cons = from_obs(self.game, obs)
        hints = plausible_cards(self.game, self.cons.color_plausible, self.cons.rank_plausible)
        if self.knowledge is not None:
            self.known = self.knowledge.observe(obs, self.known)
            allowed = hints & self.knowledge.own_cards(self.known)
            hints = torch.where(allowed.any(-1, keepdim=True), allowed, hints)
        held = torch.arange(self.game.hand_size, device=state.device) < self.cons.hand_len[:, None]
        self.allowed = hints & held[..., None]  # [G, H, T]
        # the draws' keys: a hash of everything observed now (the same observation, the same draws)
        weights = hash32(torch.arange(obs.shape[1], device=obs.device))
        self.key = hash_keys(0xBA7E5, (obs.long() * weights).sum(1))
        self._cache: dict[str, torch.Tensor] = {}

    def _weigh(self, view, games: torch.Tensor) -> None:
        """L(i, c) times the share of S draws holding c in slot i under which the partner makes its move."""
        hands, valid = self._draw(self.samples, self.key.index_select(0, games), games)  # [G', S, H]
        g, s, h = hands.shape
        rows = valid.flatten().nonzero().flatten()
        flat, game = hands.reshape(-1, h), games.repeat_interleave(s)
        like = torch.zeros(g * s, dtype=torch.float64, device=hands.device)
        for r in rows.split(CHUNK):
            like[r] = self._move_chance(view, flat.index_select(0, r), game.index_select(0, r))
        ratio = factorised.likelihood_ratio(hands, valid, like.view(g, s), self.game.card_types, self.shrink)
        self.loglike.index_add_(0, games, ratio.log())

    def _move_chance(self, view, hands: torch.Tensor, game: torch.Tensor) -> torch.Tensor:
        """[n] float64: the chance the partner makes its move under each hand: 0/1 greedy (within Q_TOL) at
        temperature 0, else the softmax of its legal Q-values (advantages) over the temperature."""
        if self.temperature == 0:
            return self.policy.made_move(view, hands, game).double()
        q, legal = self.policy.q(view, hands, game)
        logp = (q.double() / self.temperature).masked_fill(~legal, float("-inf")).log_softmax(1)
        return logp.gather(1, view.move.index_select(0, game)[:, None]).squeeze(1).exp()

    # ---- the belief ------------------------------------------------------------------------------------
    def marginals(self, kind: str = "v2") -> torch.Tensor:
        """[G, H, T] float64 per-slot card probabilities (0 in empty slots): 'v0' grounded (C x HM), 'v1'
        self-consistent, 'v2' the Bayesian belief with the V0 mix-in (the one drawn from)."""
        if kind not in self._cache:
            self._cache[kind] = factorised.marginals(kind, self.cons.unseen, self.allowed, self.loglike,
                                                     self.iterations, self.mix, mix_with="v0")
        return self._cache[kind]

    # ---- drawing hands ---------------------------------------------------------------------------------
    def _draw(self, m: int, keys: torch.Tensor, games: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """m hands per game [G'] drawn slot by slot from the Bayesian marginals with hashed counters keyed by
        keys [G']: (hands [G', m, H] long, -1 in empty slots; valid [G', m]: they fit hints and counts)."""
        h = self.game.hand_size
        p = self.marginals("v2").index_select(0, games)  # [G', H, T]
        held = torch.arange(h, device=p.device) < self.cons.hand_len.index_select(0, games)[:, None]
        hands = factorised.draw(p, held, m, keys)
        cum = p.cumsum(-1)
        c = self.cons
        valid = valid_hands(self.game, hands, c.unseen.index_select(0, games),
                            c.color_plausible.index_select(0, games), c.rank_plausible.index_select(0, games),
                            c.hand_len.index_select(0, games), self.allowed.index_select(0, games))
        return hands, valid & (cum[..., -1] > 0).where(held, True).all(1)[:, None]

    @torch.no_grad()
    def sample(self, k: int, keys: torch.Tensor, games: torch.Tensor) -> SampledHands:
        """k hands for each of the games [G']: the first k of OVERSAMPLE * k draws that fit the counts."""
        m = k * OVERSAMPLE
        hands, valid = self._draw(m, keys, games)
        first, ok = first_accepted(valid, k)
        out = hands.gather(1, first[..., None].expand(-1, -1, hands.shape[2]))
        return SampledHands(torch.where(ok[..., None], out, -1), ok)

