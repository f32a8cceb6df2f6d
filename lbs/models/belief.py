"""Learned belief over a player's own hand (LBS paper, Fig. 2B "Belief Learning").

An encoder (MLP, then a multi-layer LSTM) reads the player's private observation sequence; at each
time step its output is the context from which an autoregressive decoder LSTM predicts the player's
own cards slot by slot, oldest (slot 0) to newest, each step seeing the context and the embedding of
the previous card (a start token before slot 0). Trained by teacher forcing with the negative
log-likelihood per card; at search time it draws K hands per query in one batched decoder pass.

With cfg.count_prior (the default) the decoder's logits for slot s are added to the log of the
counting prior: copies the player cannot see, minus those the earlier slots already took, times the
hint plausibility of slot s. The network then only has to learn what the blueprint's actions reveal
beyond public card counting (a 2-core CPU run without it never caught up with the grounded belief),
and every sample respects hints and counts. The prior's inputs are read from the current
observation and carried in the context: [encoder output E | unseen copies C | plausible cards H*C].

With cfg.blueprint_features the encoder also reads, at every turn, the scores the blueprint's own network
gives each move from the same observation, as log-softmax (a frozen copy of the network inside the model,
advanced turn by turn beside the encoder, all moves taken as legal): what the blueprint would do is a
function of what the player observed, so it adds no information, but it hands the belief the blueprint's
own reading of its conventions instead of making it learn them again from the raw observations. The
encoder state is then (h, c, blueprint h, blueprint c).

Shapes: B batch, T time, D = game.private_dim, E = cfg.hidden, H = game.hand_size,
C = game.card_types card ids (colour * ranks + rank); -1 marks an empty slot.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..hanabi.config import GameConfig
from ..hanabi.encode import own_hand_facts, public_features
from ..hanabi.rng import uniform
from .qnet import HiddenState

# mask_fn(slot, hands_so_far [Q, k, H] with -1 from `slot` on) -> allowed card ids, broadcastable to [Q, k, C]
MaskFn = Callable[[int, torch.Tensor], torch.Tensor]


@dataclass
class BeliefConfig:
    """Belief network sizes (defaults: the LBS paper's reference model)."""

    hidden: int = 512
    """Width of the encoder MLP, the encoder LSTM (= context size E) and the decoder LSTM."""
    mlp_layers: int = 2
    """Linear+ReLU layers before the encoder LSTM (at least 1)."""
    lstm_layers: int = 2
    """Layers of the encoder LSTM over time."""
    decoder_layers: int = 1
    """Layers of the decoder LSTM over hand slots."""
    card_embed: int = 64
    """Size of the previous-card embedding fed to the decoder."""
    count_prior: bool = True
    """Add the log counting prior (unseen copies left x hint plausibility) to the decoder logits."""
    blueprint_features: bool = False
    """The encoder also reads the blueprint network's scores of every move at every turn, as log-softmax (a
    frozen copy of the network inside the model; a rule bot has none)."""

    LEGACY_DEFAULTS: ClassVar[dict] = {"count_prior": False}
    """Files written before a field existed load with the value that reproduces them (lbs.configs)."""

    def __post_init__(self) -> None:
        for name in ("hidden", "mlp_layers", "lstm_layers", "decoder_layers", "card_embed"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"BeliefConfig.{name}={v!r}: must be an int >= 1")
        for name in ("count_prior", "blueprint_features"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"BeliefConfig.{name}={getattr(self, name)!r}: must be a bool")



@dataclass
class HandLogProb:
    """Teacher-forced likelihood of true hands."""

    slot_log_prob: torch.Tensor  # [B, T, H] log p(card_s | context, cards_<s); 0 at empty slots
    nll_per_card: torch.Tensor  # [] mean NLL over held slots (the training loss when no card is weighed)
    num_cards: torch.Tensor  # [] held slots counted in the mean
    hid: HiddenState  # encoder (h, c) [lstm_layers, B, hidden] after the sequence (chunked training)


class BeliefModel(nn.Module):
    """Autoregressive belief p(own hand | private observation history)."""

    conventions: str = ""
    """the rule bot whose conventions its blueprint learnt from that bot's games ('' none), as the belief
    trainer recorded it (BeliefTrainConfig.conventions); a record for model cards, which search does not
    read (where LBS draws its hands is SearchConfig.knowledge). Set from the checkpoint
    (lbs.models.io.load_belief)"""

    def __init__(self, game: GameConfig, cfg: BeliefConfig | None = None, blueprint: nn.Module | None = None):
        """blueprint: the network whose scores the encoder reads (cfg.blueprint_features; its greedy-move
        module, `Blueprint.mover`), copied and frozen here; its weights are saved with the belief's."""
        super().__init__()
        cfg = cfg if cfg is not None else BeliefConfig()
        self.game, self.cfg = game, cfg
        if cfg.blueprint_features != (blueprint is not None):
            raise ValueError("BeliefModel: a blueprint network is needed with cfg.blueprint_features, and "
                             "only then")
        self.blueprint: nn.Module | None = None
        if blueprint is not None:
            self.blueprint = copy.deepcopy(blueprint).float().eval().requires_grad_(False)
        layers: list[nn.Module] = []
        width = game.private_dim + (blueprint.num_actions if blueprint is not None else 0)
        for _ in range(cfg.mlp_layers):
            layers += [nn.Linear(width, cfg.hidden), nn.ReLU()]
            width = cfg.hidden
        self.mlp = nn.Sequential(*layers)
        self.encoder = nn.LSTM(cfg.hidden, cfg.hidden, cfg.lstm_layers, batch_first=True)
        # ids 0..C-1 are cards, id C is the start token read before slot 0
        self.card_embedding = nn.Embedding(game.card_types + 1, cfg.card_embed)
        self.decoder = nn.LSTM(cfg.hidden + cfg.card_embed, cfg.hidden, cfg.decoder_layers, batch_first=True)
        self.head = nn.Linear(cfg.hidden, game.card_types)

    def train(self, mode: bool = True) -> BeliefModel:
        """The blueprint copy stays in eval mode: it is frozen."""
        super().train(mode)
        if self.blueprint is not None:
            self.blueprint.eval()
        return self

    @property
    def start_token(self) -> int:
        return self.game.card_types

    @property
    def context_dim(self) -> int:
        """Size E of a context: the encoder output, plus the counting prior's inputs when used."""
        c = self.game.card_types
        return self.cfg.hidden + (c * (self.game.hand_size + 1) if self.cfg.count_prior else 0)

    def _split(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """context [..., E] -> (encoder output [..., hidden], unseen [..., C], plausible [..., H, C])."""
        e, c = self.cfg.hidden, self.game.card_types
        unseen = context[..., e : e + c].float()
        plaus = context[..., e + c :].reshape(*context.shape[:-1], self.game.hand_size, c).float()
        return context[..., :e], unseen, plaus

    # ---- encoder -----------------------------------------------------------------------------
    def initial_state(self, batch: int, device: torch.device | str | None = None) -> tuple:
        """Zero encoder state for `batch` sequences (with the blueprint's: its initial state after it);
        advance it with encode() one turn at a time."""
        shape = (self.cfg.lstm_layers, batch, self.cfg.hidden)
        dev = device if device is not None else self.head.weight.device
        z = torch.zeros(shape, device=dev, dtype=self.head.weight.dtype)
        if self.blueprint is None:
            return HiddenState(z, z.clone())
        return (z, z.clone(), *self.blueprint.initial_state(batch, dev))

    def blueprint_scores(self, priv: torch.Tensor, hid: tuple) -> tuple[torch.Tensor, tuple]:
        """The blueprint's scores of every action (all taken as legal) over observations [B, T, D], as
        log-softmax floored at -20 [B, T, A] (a network's scores share a large offset that moves from turn to
        turn; only their differences say what it would do), and its state after them."""
        legal = torch.ones(*priv.shape[:2], self.blueprint.num_actions, dtype=torch.bool, device=priv.device)
        with torch.no_grad():
            scores, hid = self.blueprint(priv, public_features(self.game, priv), legal, hid)
        return F.log_softmax(scores.float(), -1).clamp(min=-20.0), hid

    def encode(self, priv: torch.Tensor, hid: tuple | None = None) -> tuple[torch.Tensor, tuple]:
        """priv [B, T, D] private observations -> (context [B, T, E], encoder state after step T).

        Passing the returned state back in continues the sequence, so search can add one turn at a
        time instead of re-reading the history.
        """
        if priv.dim() != 3 or priv.shape[-1] != self.game.private_dim:
            raise ValueError(
                f"priv must be [B, T, private_dim={self.game.private_dim}], got {tuple(priv.shape)}"
            )
        if hid is None:
            hid = self.initial_state(priv.shape[0], priv.device)
        elif hid[0].shape != (self.cfg.lstm_layers, priv.shape[0], self.cfg.hidden):
            raise ValueError(
                f"hid must be ([{self.cfg.lstm_layers}, {priv.shape[0]}, {self.cfg.hidden}], same), "
                f"got {tuple(hid[0].shape)}"
            )
        x, after = priv, ()
        if self.blueprint is not None:
            scores, after = self.blueprint_scores(priv, tuple(hid[2:]))
            x = torch.cat([priv, scores.to(priv.dtype)], -1)
        x = self.mlp(x.to(self.head.weight.dtype))
        context, (h, c) = self.encoder(x, tuple(hid[:2]))
        if self.cfg.count_prior:
            unseen, plaus = own_hand_facts(self.game, priv)
            context = torch.cat([context, unseen.to(context.dtype), plaus.flatten(-2).to(context.dtype)], -1)
        return context, (HiddenState(h, c) if self.blueprint is None else (h, c, *after))

    # ---- decoder (teacher forced) -------------------------------------------------------------
    def _check_context(self, context: torch.Tensor) -> None:
        if context.dim() != 2 or context.shape[-1] != self.context_dim:
            raise ValueError(f"context must be [Q, E={self.context_dim}], got {tuple(context.shape)}")

    def decode_logits(self, context: torch.Tensor, hands: torch.Tensor) -> torch.Tensor:
        """Teacher-forced slot logits [..., H, C] for contexts [..., E] and hands [..., H].

        Slot s sees the true cards of slots < s; empty slots (-1) feed the start token, which is
        harmless because hands are packed from slot 0 and empty slots are never scored.
        """
        h = self.game.hand_size
        e = self.context_dim
        if hands.shape[-1] != h or hands.shape[:-1] != context.shape[:-1] or context.shape[-1] != e:
            raise ValueError(
                f"hands [..., H={h}] and context [..., E={self.context_dim}] must share leading dims, "
                f"got {tuple(hands.shape)} and {tuple(context.shape)}"
            )
        lead, c = hands.shape[:-1], self.game.card_types
        ctx = context.reshape(-1, self.context_dim)
        cards = hands.reshape(-1, h).long()
        prev = torch.cat([torch.full_like(cards[:, :1], self.start_token), cards[:, :-1]], dim=1)
        prev = torch.where(prev >= 0, prev, self.start_token)
        net = ctx[:, : self.cfg.hidden]
        x = torch.cat([net[:, None, :].expand(-1, h, -1), self.card_embedding(prev)], dim=-1)  # [N, H, E+e]
        out, _ = self.decoder(x)
        logits = self.head(out)  # [N, H, C]
        if self.cfg.count_prior:
            _, unseen, plaus = self._split(ctx)
            logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
            logits = logits + log_count_prior(unseen[:, None, :], plaus, _used_before(cards, c))
        return logits.reshape(*lead, h, c)

    def hand_log_prob(self, context: torch.Tensor, hands: torch.Tensor) -> torch.Tensor:
        """log p(card_s | context, cards_<s) [..., H]; 0 at empty slots (-1)."""
        logits = self.decode_logits(context, hands)
        logp = F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
        held = hands >= 0
        picked = logp.gather(-1, hands.long().clamp(min=0)[..., None]).squeeze(-1)
        return torch.where(held, picked, torch.zeros_like(picked))

    def log_prob(self, priv: torch.Tensor, hands: torch.Tensor, hid: tuple | None = None) -> HandLogProb:
        """Teacher-forced likelihood of true hands [B, T, H] given private observations [B, T, D].

        Padded time steps are expressed by all-empty hands (-1), which then count for nothing.
        """
        if hands.dim() != 3 or hands.shape[-1] != self.game.hand_size or hands.shape[:2] != priv.shape[:2]:
            raise ValueError(
                f"hands must be [B, T, H={self.game.hand_size}] matching priv's [B, T] = "
                f"{tuple(priv.shape[:2])}, got {tuple(hands.shape)}"
            )
        if hands.is_floating_point():
            raise ValueError(f"hands must hold integer card ids, got dtype {hands.dtype}")
        context, hid = self.encode(priv, hid)
        slot = self.hand_log_prob(context, hands)
        n = (hands >= 0).sum()
        nll = -slot.sum() / n.clamp(min=1)
        return HandLogProb(slot_log_prob=slot, nll_per_card=nll, num_cards=n, hid=hid)

    # ---- sampling -----------------------------------------------------------------------------
    def sample(
        self,
        context: torch.Tensor,
        k: int,
        rng: torch.Tensor | torch.Generator,
        hand_len: torch.Tensor | None = None,
        mask_fn: MaskFn | None = None,
    ) -> torch.Tensor:
        """Draw k hands per query: context [Q, E] -> hands [Q, k, H] (-1 from hand_len [Q] on).

        rng: seeds [Q] (counter-based: the same seeds give the same hands on any device; vary them
        per call) or a torch.Generator on the context's device. All Q*k rows run through the decoder
        together, one step per slot. mask_fn(slot, hands_so_far) returns the allowed card ids
        (broadcastable to [Q, k, C]) so callers can forbid impossible cards; a row with nothing
        allowed falls back to the unmasked distribution (a filter then rejects it).
        """
        self._check_context(context)
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an int >= 1, got {k!r}")
        q, h, c = context.shape[0], self.game.hand_size, self.game.card_types
        dev = context.device
        if hand_len is None:
            hand_len = torch.full((q,), h, dtype=torch.long, device=dev)
        if hand_len.shape != (q,):
            raise ValueError(f"hand_len must be [Q={q}], got {tuple(hand_len.shape)}")
        if isinstance(rng, torch.Tensor):
            if rng.shape != (q,):
                raise ValueError(f"seeds must be [Q={q}], got {tuple(rng.shape)}")
            sample_idx = torch.arange(k, device=dev)[None, :]
        elif not isinstance(rng, torch.Generator):
            raise TypeError(f"rng must be a seeds tensor [Q] or a torch.Generator, got {type(rng).__name__}")

        ctx = context[:, : self.cfg.hidden].repeat_interleave(k, dim=0)  # [Q*k, hidden], row q*k + j
        if self.cfg.count_prior:
            _, unseen, plaus = self._split(context)
            used = torch.zeros(q, k, c, device=dev)  # copies each row's earlier slots took
        slots = torch.arange(h, device=dev)
        hands = torch.full((q, k, h), -1, dtype=torch.long, device=dev)
        prev = torch.full((q * k,), self.start_token, dtype=torch.long, device=dev)
        state: tuple[torch.Tensor, torch.Tensor] | None = None
        for s in range(h):
            x = torch.cat([ctx, self.card_embedding(prev)], dim=-1)[:, None, :]
            out, state = self.decoder(x, state)
            logits = self.head(out[:, 0]).reshape(q, k, c).double()
            if self.cfg.count_prior:
                logits = logits + log_count_prior(unseen[:, None, :], plaus[:, None, s, :], used)
            if mask_fn is not None:
                allowed = mask_fn(s, hands).to(dev).bool().expand(q, k, c) & (logits > float("-inf"))
                allowed = allowed | ~allowed.any(-1, keepdim=True)
                logits = logits.masked_fill(~allowed, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            if isinstance(rng, torch.Tensor):
                u = 1.0 - uniform(rng.long()[:, None], sample_idx, s)  # (0, 1]
            else:
                u = 1.0 - torch.rand((q, k), generator=rng, device=dev, dtype=torch.float64)
            card = _inverse_cdf(probs, u)
            card = torch.where(s < hand_len[:, None], card, -1)  # [Q, k]
            hands = torch.where(slots == s, card[..., None], hands)
            if self.cfg.count_prior:
                used += F.one_hot(card.clamp(min=0), c) * (card >= 0)[..., None]
            prev = torch.where(card >= 0, card, self.start_token).reshape(-1)
        return hands


def log_count_prior(unseen: torch.Tensor, plausible: torch.Tensor, used: torch.Tensor) -> torch.Tensor:
    """log of (unseen - used)+ x plausible per card id [..., C] (broadcast), -inf where that is 0.

    A slot for which nothing is possible (an empty slot, or inputs that are not a real game) gets
    zeros instead, so its logits are left unchanged rather than becoming NaN.
    """
    w = (unseen - used).clamp(min=0) * plausible
    log_w = torch.where(w > 0, w.log(), float("-inf"))
    return torch.where((w > 0).any(-1, keepdim=True), log_w, torch.zeros_like(log_w))


def _used_before(hands: torch.Tensor, c: int) -> torch.Tensor:
    """hands [..., H] -> copies of each card id held in the earlier slots [..., H, C]."""
    placed = F.one_hot(hands.long().clamp(min=0), c) * (hands >= 0)[..., None]
    return placed.cumsum(-2) - placed


def counting_log_prob(unseen: torch.Tensor, plausible: torch.Tensor, hands: torch.Tensor) -> torch.Tensor:
    """log p(card_s | cards_<s) [..., H] of true hands under the counting prior alone (no network):
    unseen [..., C], plausible [..., H, C], hands [..., H]; 0 at empty slots. The baseline that tells
    what a learned belief adds beyond counting slot by slot."""
    logw = log_count_prior(unseen[..., None, :].double(), plausible.double(),
                           _used_before(hands, unseen.shape[-1]))
    picked = torch.log_softmax(logw, -1).gather(-1, hands.long().clamp(min=0)[..., None]).squeeze(-1)
    return torch.where(hands >= 0, picked, torch.zeros_like(picked))


def _inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Index of the first card whose cumulative probability reaches u * total, for u in (0, 1].

    A zero-probability card can never be chosen: the chosen index j has cdf[j] >= u*total > cdf[j-1].
    """
    cdf = probs.cumsum(-1)
    target = u * cdf[..., -1]
    return (cdf < target[..., None]).sum(-1).clamp(max=probs.shape[-1] - 1)
