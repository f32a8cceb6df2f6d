"""Q-networks for Hanabi: public-LSTM, plain LSTM, feed-forward.

Actions: A = game.num_actions = num_moves + 1, the last being the no-op of a seat that is not to move
(lbs.acting holds the acting rules; the networks only need the count).

Network interface (every kind, batch-first; one batch row is one (game, player) stream):
  priv [B, T, private_dim] canonical observation, publ [B, T, public_dim], legal [B, T, A] bool,
  hid = HiddenState(h, c) each [layers, B, hidden];
  forward(priv, publ, legal, hid) -> (q [B, T, A] unmasked, hid);  step(...) the same without T.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from ..blueprint import Blueprint, Capabilities
from ..hanabi.config import GameConfig
from . import card_facts

KINDS = ("publ_lstm", "lstm", "ff")
AUX_PLAYABLE, AUX_PLAYED, AUX_OTHER, AUX_EMPTY = 0, 1, 2, -1
AUX_CLASSES = 3


class HiddenState(NamedTuple):
    """Recurrent state (h, c), each [layers, B, hidden]; a plain tuple anywhere one is expected.

    A named type so batching code (the inference server) can tell it from a tuple of outputs: its
    batch dimension is 1, not 0 (`batch_dim`; other blueprints' states name their own).
    """

    h: torch.Tensor
    c: torch.Tensor
    batch_dim = 1  # no annotation: a class constant, not a field


def state_batch_dim(state: tuple) -> int:
    """The dimension that holds the rows of a recurrent state's tensors: its type's `batch_dim` (a plain
    tuple is taken as an LSTM's (h, c), batch on dim 1; SmartBotState's is 0)."""
    return getattr(type(state), "batch_dim", 1)


def select_rows(state: tuple, rows: torch.Tensor) -> tuple:
    """The state of rows `rows` [n] (long) of a recurrent state, of the same type."""
    d = state_batch_dim(state)
    return type(state)(*(x.index_select(d, rows) for x in state))


WithState = tuple[torch.Tensor, HiddenState]  # (output, new recurrent state)


# ---- config --------------------------------------------------------------------------------------
@dataclass
class NetConfig:
    """Q-network shape; sizes of inputs and outputs come from the GameConfig."""

    kind: str = "publ_lstm"
    """publ_lstm (LBS paper: private MLP x public LSTM), lstm (LSTM over the private MLP) or ff (Ape-X)"""
    hidden: int = 512
    """width of every hidden layer and of the LSTM"""
    lstm_layers: int = 2
    """stacked LSTM layers (ignored by ff)"""
    mlp_layers: int = 3
    """Linear+ReLU layers over the private observation"""
    aux_head: bool = False
    """add the auxiliary head: per own card playable / already played / other"""
    dueling: bool = True
    """Q = V + A - mean of A over legal actions; False: Q = A"""
    counting: bool = False
    """also feed what the card counts say (lbs.models.card_facts): per card id and per slot of every hand
    the chance it is playable / useless / a last copy; public facts into the public network too"""
    hint_facts: bool = False
    """also feed what each hint the observer could give would say (lbs.models.card_facts.hint_facts): per
    partner and hint, the touched cards' facts, the slots it shows playable, what it rules out"""
    discard_facts: bool = False
    """also feed every player's next discard by SmartBot's rule (lbs.models.card_facts.discard_facts): per
    slot whether it is that player's next discard, and the facts of the other players' cards there"""
    policy_net: bool = False
    """a policy network of its own beside the Q network (the same shape; HeldQNet): the move is the policy's
    greedy legal move and Q only prices moves (held_scores), so learning values cannot change a move;
    imitation trains the policy, a values phase Q alone"""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"NetConfig.kind={self.kind!r}: must be one of {KINDS}")
        for name in ("hidden", "lstm_layers", "mlp_layers"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"NetConfig.{name}={v!r}: must be an int >= 1")
        for name in ("aux_head", "dueling", "counting", "hint_facts", "discard_facts", "policy_net"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"NetConfig.{name}={getattr(self, name)!r}: must be a bool")


# ---- building blocks -----------------------------------------------------------------------------
def mlp(d_in: int, hidden: int, layers: int) -> nn.Sequential:
    """layers x (Linear, ReLU)."""
    mods: list[nn.Module] = []
    for i in range(layers):
        mods += [nn.Linear(d_in if i == 0 else hidden, hidden), nn.ReLU()]
    return nn.Sequential(*mods)


def run_lstm(lstm: nn.LSTM, x: torch.Tensor, hid: tuple) -> tuple[torch.Tensor, tuple]:
    """lstm(x, hid) for batch-first x [B, T, D]; one step (acting, search rollouts) runs as explicit cells
    (lstm_cells) on every device. On CUDA cuDNN picks a persistent kernel for a single step of a wide
    batch that is ~100x slower than the matmuls it replaces (4.6 ms per layer at 16,384 rows x 128 on an
    H100, 90% of a search rollout; experiments/results/bench_search/bench_search_2026-11-22_h100.md); on
    CPU oneDNN's step is 1.64x slower than the cells at a rollout batch's 16,384 rows
    (experiments/results/bench_lstm_step/bench_lstm_step_2026-11-22_cpu.md). Sequences (training) keep
    the fused layer."""
    if x.shape[1] == 1:
        return lstm_cells(lstm, x, hid)
    return lstm(x, tuple(hid))


def lstm_cells(lstm: nn.LSTM, x: torch.Tensor, hid: tuple) -> tuple[torch.Tensor, tuple]:
    """One step of a batch-first nn.LSTM ([B, 1, D] -> [B, 1, H], (h, c) [layers, B, H]): per layer one
    matmul of [input, h] against the two weight matrices side by side, then the gates."""
    h0, c0 = hid
    inp, hs, cs = x[:, 0], [], []
    for k in range(lstm.num_layers):
        w = torch.cat([getattr(lstm, f"weight_ih_l{k}"), getattr(lstm, f"weight_hh_l{k}")], 1)
        b = getattr(lstm, f"bias_ih_l{k}") + getattr(lstm, f"bias_hh_l{k}")
        gates = torch.addmm(b, torch.cat([inp, h0[k]], 1), w.t())
        i, f, g, o = gates.chunk(4, dim=-1)  # torch's gate order
        c = torch.sigmoid(f) * c0[k] + torch.sigmoid(i) * torch.tanh(g)
        inp = torch.sigmoid(o) * torch.tanh(c)
        hs.append(inp)
        cs.append(c)
    return inp[:, None], (torch.stack(hs), torch.stack(cs))


HOLD_GAP = 0.05
"""How far below the policy's move's Q (in points) a HeldQNet scores every move whose Q
would reach it: above fp16's spacing at 32 points (1/32) and the range filter's tolerance (Q_TOL)."""


def held_scores(q: torch.Tensor, logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """A HeldQNet's step scores [..., A]: Q of the policy's greedy legal move where it is, every
    other move's Q capped HOLD_GAP below it. Their greedy move is the policy's, their best is Q of the
    policy's move (the value LBS bootstraps with), and a move Q ranks below the policy's keeps its Q."""
    low = torch.finfo(logits.dtype).min
    move = logits.masked_fill(~legal, low).argmax(-1, keepdim=True)
    q_move = q.gather(-1, move)
    return torch.minimum(q, q_move - HOLD_GAP).scatter(-1, move, q_move)


class Heads(NamedTuple):
    """Everything a sequence forward computes, for the losses: Q as the value head gives it (not held),
    the move logits (the policy network's, or Q itself without one), the auxiliary logits (None without an
    auxiliary head) and the recurrent state after the last step."""

    q: torch.Tensor
    logits: torch.Tensor
    aux: torch.Tensor | None
    hid: HiddenState


class QHead(nn.Module):
    """Dueling (or plain) head: features [..., hidden] -> Q [..., A]."""

    def __init__(self, hidden: int, actions: int, dueling: bool):
        super().__init__()
        self.adv = nn.Linear(hidden, actions)
        self.value = nn.Linear(hidden, 1) if dueling else None

    def forward(self, o: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        a = self.adv(o)
        if self.value is None:
            return a
        m = legal.to(a.dtype)
        mean = (a * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)
        # Subtracting the mean over *legal* actions only keeps V the average legal Q.
        return self.value(o) + a - mean


def _check_inputs(net: QNet, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, seq: bool) -> None:
    want = 3 if seq else 2
    what = "[B, T, D]" if seq else "[B, D]"
    g = net.game
    dims = (("priv", priv, g.private_dim), ("publ", publ, g.public_dim), ("legal", legal, net.num_actions))
    for name, x, d in dims:
        if x.dim() != want or x.shape[-1] != d:
            raise ValueError(f"{name} must be {what} with D={d}, got {tuple(x.shape)}")
    if not (priv.shape[:-1] == publ.shape[:-1] == legal.shape[:-1]):
        raise ValueError(f"priv/publ/legal disagree on leading dims: {tuple(priv.shape)}, "
                         f"{tuple(publ.shape)}, {tuple(legal.shape)}")


class QNet(Blueprint):
    """Base class: the shared interface. Subclasses define _features (and the public split where valid)."""

    capabilities = Capabilities(value=True)
    """Q-values a leaf can bootstrap with; a net whose recurrent state depends on public features only adds
    the public split (advance_public / public_out once, then q_from_public for many candidate hands)"""

    def __init__(self, game: GameConfig, cfg: NetConfig, layers: int):
        super().__init__()
        self.game, self.cfg = game, cfg
        self.num_actions = game.num_actions
        self.layers = layers
        self.head = QHead(cfg.hidden, self.num_actions, cfg.dueling)
        self.aux = nn.Linear(cfg.hidden, game.hand_size * AUX_CLASSES) if cfg.aux_head else None
        self.policy = None
        """the policy network of a HeldQNet (None: the move is Q's greedy one)"""
        self.families = card_facts.families(cfg)
        """the families of facts its input adds to the observation (NetConfig.counting, hint_facts, ...)"""
        self.input_layout = card_facts.input_layout(game, self.families)
        """the private network's input by name: 'obs.<section>' (the observation), then the facts' sections"""
        self.private_in = self.input_layout.dim
        """width of the private network's input"""
        self.public_in = card_facts.public_input_dim(game, self.families)
        """width of the public network's input: public features, then the public facts"""

    def public_facts(self, publ: torch.Tensor) -> torch.Tensor | None:
        """The public families' facts [..., Fp] of public features [..., public_dim], in their dtype (None
        without a public family): one computation serves both networks of a step."""
        return card_facts.public_input(self.game, self.families, publ)

    def private_input(self, priv: torch.Tensor, facts: torch.Tensor | None = None) -> torch.Tensor:
        """The private network's input (input_layout) from observations [..., private_dim] (already in
        self.dtype); facts: the public facts where already computed from the same step's public features."""
        return card_facts.network_input(self.game, self.families, priv, facts)

    @property
    def dtype(self) -> torch.dtype:
        return self.head.adv.weight.dtype

    def initial_state(self, batch: int, device: torch.device | str | None = None) -> HiddenState:
        """Zero state [layers, batch, hidden] (layers = 0 for the feed-forward net)."""
        device = self.head.adv.weight.device if device is None else device
        z = torch.zeros(self.layers, batch, self.cfg.hidden, device=device, dtype=self.dtype)
        return HiddenState(z, z.clone())

    def _features(self, priv: torch.Tensor, publ: torch.Tensor, hid: tuple) -> WithState:
        raise NotImplementedError

    def forward(
        self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple
    ) -> WithState:
        """Sequences [B, T, ...] -> (q [B, T, A], hid after the last step)."""
        _check_inputs(self, priv, publ, legal, seq=True)
        o, hid = self._features(priv.to(self.dtype), publ.to(self.dtype), hid)
        return self.head(o, legal), hid

    def forward_heads(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple) -> Heads:
        """Sequences [B, T, ...] -> Heads: each head's output apart, as the losses train them."""
        _check_inputs(self, priv, publ, legal, seq=True)
        o, hid = self._features(priv.to(self.dtype), publ.to(self.dtype), hid)
        q = self.head(o, legal)
        aux = None if self.aux is None else self.aux(o).unflatten(-1, (self.game.hand_size, AUX_CLASSES))
        return Heads(q, q, aux, hid)

    def forward_moves(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple
                      ) -> torch.Tensor:
        """Sequences -> move logits [B, T, A] (imitation's forward: Q read as logits)."""
        return self.forward_heads(priv, publ, legal, hid).logits

    def step(
        self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple
    ) -> WithState:
        """One time step: [B, D] inputs -> (q [B, A], hid)."""
        _check_inputs(self, priv, publ, legal, seq=False)
        q, hid = self.forward(priv[:, None], publ[:, None], legal[:, None], hid)
        return q[:, 0], hid

    # -- public split (valid only where capabilities.public_split) --
    def public_out(self, publ: torch.Tensor, hid: tuple) -> WithState:
        """Public features [B, T, Dp] (or [B, Dp]) -> (public output [B, T, hidden] (or [B, hidden]), hid)."""
        raise TypeError(f"{type(self).__name__}'s recurrent state depends on private features; "
                        "run forward per candidate hand instead")

    def advance_public(self, publ: torch.Tensor, hid: tuple) -> HiddenState:
        """Advance the recurrent state on public features only (one call serves every candidate hand)."""
        return self.public_out(publ, hid)[1]

    def q_from_public(self, priv: torch.Tensor, publ_out: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """Q [..., A] for private observations [..., D] against a public output [..., hidden]
        (broadcast: e.g. priv [B, K, D] for K candidate hands with publ_out [B, 1, hidden])."""
        raise TypeError(f"{type(self).__name__} has no public/private split")

    def private_input_layer(self) -> nn.Linear:
        """The private network's first layer, linear in private_input: a candidate hand's pre-activation is
        a shared term plus one weight column per (slot, card) (and, for a counting network, terms of the
        facts those cards change), so SPARTA's filter sums columns instead of re-encoding every candidate
        (lbs.search.range_filter)."""
        return self.priv_net[0]

    def advantages_from_input_layer(self, x: torch.Tensor, publ_out: torch.Tensor) -> torch.Tensor:
        """Advantages [n, A] from the private input layer's pre-activation x [n, hidden] (modified in
        place) and the public output [n, hidden]: Q up to a per-row constant (the value and the legal mean
        of the advantages are the same for every action), so the same greedy move and the same gaps."""
        for layer in self.priv_net[1:]:
            x = x.relu_() if isinstance(layer, nn.ReLU) else layer(x)
        return self.head.adv(x.mul_(publ_out))

    def _public_in(self, publ: torch.Tensor) -> tuple[torch.Tensor, bool]:
        if publ.dim() not in (2, 3) or publ.shape[-1] != self.game.public_dim:
            raise ValueError(f"publ must be [B, T, {self.game.public_dim}] or [B, {self.game.public_dim}], "
                             f"got {tuple(publ.shape)}")
        one = publ.dim() == 2
        # contiguous: public features are a strided view of the observation, and a Linear over a strided
        # [B, T, D] input runs as B batched vector products that each re-read the whole weight
        return (publ[:, None] if one else publ).to(self.dtype).contiguous(), one


class PublicLSTMQNet(QNet):
    """LBS paper Fig. 2A: private MLP over the full observation times a public LSTM over public features.

    The recurrent state sees public features only, so one state serves every hand a player might hold.
    """

    capabilities = Capabilities(value=True, public_state=True, public_split=True)

    def __init__(self, game: GameConfig, cfg: NetConfig):
        super().__init__(game, cfg, cfg.lstm_layers)
        self.priv_net = mlp(self.private_in, cfg.hidden, cfg.mlp_layers)
        self.publ_net = mlp(self.public_in, cfg.hidden, 1)
        self.lstm = nn.LSTM(cfg.hidden, cfg.hidden, num_layers=cfg.lstm_layers, batch_first=True)

    def public_out(self, publ: torch.Tensor, hid: tuple) -> WithState:
        x, one = self._public_in(publ)
        out, hid = self._run_public(x, self.public_facts(x), hid)
        return (out[:, 0] if one else out), hid

    def _run_public(self, x: torch.Tensor, facts: torch.Tensor | None, hid: tuple) -> WithState:
        """The public network over public features x [B, T, Dp] and their facts (None: not counting)."""
        x = x if facts is None else torch.cat([x, facts], -1)
        out, (h, c) = run_lstm(self.lstm, self.publ_net(x), hid)
        return out, HiddenState(h, c)

    def q_from_public(self, priv: torch.Tensor, publ_out: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        return self.head(self.priv_net(self.private_input(priv.to(self.dtype))) * publ_out, legal)

    def _features(self, priv: torch.Tensor, publ: torch.Tensor, hid: tuple) -> WithState:
        x, _ = self._public_in(publ)
        facts = self.public_facts(x)
        publ_out, hid = self._run_public(x, facts, hid)
        return self.priv_net(self.private_input(priv, facts)) * publ_out, hid


class LSTMQNet(QNet):
    """R2D2's usual net: MLP over the private observation, LSTM over that (state depends on private info)."""

    def __init__(self, game: GameConfig, cfg: NetConfig):
        super().__init__(game, cfg, cfg.lstm_layers)
        self.priv_net = mlp(self.private_in, cfg.hidden, cfg.mlp_layers)
        self.lstm = nn.LSTM(cfg.hidden, cfg.hidden, num_layers=cfg.lstm_layers, batch_first=True)

    def _features(self, priv: torch.Tensor, publ: torch.Tensor, hid: tuple) -> WithState:
        out, (h, c) = run_lstm(self.lstm, self.priv_net(self.private_input(priv)), hid)
        return out, HiddenState(h, c)


class FFQNet(QNet):
    """Feed-forward dueling net over the private observation (SPARTA paper's Ape-X blueprint).

    Its state has zero layers ([0, B, hidden]): tuple-compatible and carried through unchanged.
    """

    capabilities = Capabilities(value=True, public_state=True, public_split=True)  # trivially: no state

    def __init__(self, game: GameConfig, cfg: NetConfig):
        super().__init__(game, cfg, 0)
        self.priv_net = mlp(self.private_in, cfg.hidden, cfg.mlp_layers)

    def public_out(self, publ: torch.Tensor, hid: tuple) -> WithState:
        x, one = self._public_in(publ)
        out = x.new_ones(*x.shape[:-1], 1)  # a neutral factor: Q depends on priv only
        return (out[:, 0] if one else out), HiddenState(*hid)

    def q_from_public(self, priv: torch.Tensor, publ_out: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        return self.head(self.priv_net(self.private_input(priv.to(self.dtype))) * publ_out, legal)

    def _features(self, priv: torch.Tensor, publ: torch.Tensor, hid: tuple) -> WithState:
        return self.priv_net(self.private_input(priv)), HiddenState(*hid)


class HeldQNet(QNet):
    """NetConfig.policy_net: a policy network and a Q network of one shape side by side. The move is the
    policy's (its Q-values read as logits, as imitation trains them); Q only prices moves: the step's scores
    are held_scores, whose greedy move is the policy's and whose best is Q of that move. A values phase trains
    the Q network alone, so it learns the policy's action values with every move held by construction.

    It is a QNet to every caller: one recurrent state (the two networks' layers stacked: Q's, then the
    policy's), one public output (the two side by side on the last dimension), the policy's input layer for
    SPARTA's filter (whose fast path then reads the policy's logits: the same greedy move)."""

    def __init__(self, game: GameConfig, cfg: NetConfig):
        Blueprint.__init__(self)  # not QNet's: the heads are the two networks'
        plain = dataclasses.replace(cfg, policy_net=False)
        self.q, self.policy = make_qnet(game, plain), make_qnet(game, plain)
        self.capabilities = type(self.q).capabilities
        self.game, self.cfg, self.num_actions = game, cfg, self.q.num_actions
        self.layers = self.q.layers + self.policy.layers
        for name in ("families", "input_layout", "private_in", "public_in"):  # the same in both networks
            setattr(self, name, getattr(self.q, name))

    # what callers read of a QNet: Q's head (the value fit), the policy's input (the range filter)
    @property
    def head(self) -> QHead:
        return self.q.head

    @property
    def aux(self) -> nn.Module | None:
        return self.q.aux

    def _split(self, hid: tuple) -> tuple[HiddenState, HiddenState]:
        n = self.q.layers
        return HiddenState(hid[0][:n], hid[1][:n]), HiddenState(hid[0][n:], hid[1][n:])

    @staticmethod
    def _join(a: tuple, b: tuple) -> HiddenState:
        return HiddenState(torch.cat([a[0], b[0]]), torch.cat([a[1], b[1]]))

    def initial_state(self, batch: int, device: torch.device | str | None = None) -> HiddenState:
        return self._join(self.q.initial_state(batch, device), self.policy.initial_state(batch, device))

    def forward_heads(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple) -> Heads:
        hq, hp = self._split(hid)
        heads = self.q.forward_heads(priv, publ, legal, hq)
        logits, hp = self.policy(priv, publ, legal, hp)
        return Heads(heads.q, logits, heads.aux, self._join(heads.hid, hp))

    def forward_moves(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple
                      ) -> torch.Tensor:
        """The policy network's logits alone: imitation neither reads nor trains Q (a third of its time)."""
        return self.policy.forward_moves(priv, publ, legal, self._split(hid)[1])

    @property
    def mover(self) -> QNet:
        return self.policy

    def moves(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple,
              values: bool = True) -> WithState:
        """The policy's step (its logits: the same greedy move as step's scores) and Q's recurrent state
        advanced as step advances it, by its public stream alone where it has one: Q's private network and
        head are not run, and a later step (a leaf value) reads the state it would have read. values False
        (nothing reads Q after these moves): Q is not run at all and its state stays where it was."""
        hq, hp = self._split(hid)
        logits, hp = self.policy.step(priv, publ, legal, hp)
        if values and self.q.capabilities.public_split:
            hq = self.q.advance_public(publ, hq)
        elif values:
            hq = self.q.step(priv, publ, legal, hq)[1]
        return logits, self._join(hq, hp)

    def forward(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple) -> WithState:
        hq, hp = self._split(hid)  # (not forward_heads: a step needs no auxiliary logits)
        q, hq = self.q(priv, publ, legal, hq)
        logits, hp = self.policy(priv, publ, legal, hp)
        return held_scores(q, logits, legal), self._join(hq, hp)

    def public_out(self, publ: torch.Tensor, hid: tuple) -> WithState:
        hq, hp = self._split(hid)
        oq, hq = self.q.public_out(publ, hq)
        op, hp = self.policy.public_out(publ, hp)
        return torch.cat([oq, op], -1), self._join(hq, hp)

    def q_from_public(self, priv: torch.Tensor, publ_out: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        oq, op = publ_out.chunk(2, -1)
        return held_scores(self.q.q_from_public(priv, oq, legal), self.policy.q_from_public(priv, op, legal),
                           legal)

    def private_input_layer(self) -> nn.Linear:
        return self.policy.private_input_layer()

    def advantages_from_input_layer(self, x: torch.Tensor, publ_out: torch.Tensor) -> torch.Tensor:
        """The policy's advantages (its logits up to a per-row constant): the step's greedy move."""
        return self.policy.advantages_from_input_layer(x, publ_out.chunk(2, -1)[1])


def make_qnet(game: GameConfig, cfg: NetConfig | None = None) -> QNet:
    """Build the Q-network named by cfg.kind (default NetConfig()); with cfg.policy_net a HeldQNet of two."""
    cfg = NetConfig() if cfg is None else cfg
    if cfg.policy_net:
        return HeldQNet(game, cfg)
    return {"publ_lstm": PublicLSTMQNet, "lstm": LSTMQNet, "ff": FFQNet}[cfg.kind](game, cfg)
