"""Q-networks: shapes for every kind and player count, masking, the dueling mean, the public/private
split search relies on, sequence == stepping, the fixed double."""

from __future__ import annotations

import pytest
import torch
from conftest import CONFIGS, DEVICES, FULL_GAMES, random_rollout

from lbs.acting import greedy
from lbs.hanabi import GameConfig, public_features
from lbs.infer import tf32_matmuls
from lbs.models import FixedQNet, HiddenState, NetConfig, make_qnet
from lbs.models.qnet import HOLD_GAP, KINDS, QHead, held_scores, lstm_cells

SMALL = dict(hidden=32, lstm_layers=2, mlp_layers=2)


FACTS = {"plain": {}, "counting": {"counting": True}, "hints": {"counting": True, "hint_facts": True},
         "discards": {"counting": True, "hint_facts": True, "discard_facts": True},
         "policy": {"counting": True, "policy_net": True}}
"""The inputs a network may read beside the observation (NetConfig.counting, hint_facts, discard_facts),
and a network whose moves come from a policy network (NetConfig.policy_net)."""


def small_net(game: GameConfig, kind: str, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    return make_qnet(game, NetConfig(kind=kind, **{**SMALL, **kw})).eval()





def sequences(game: GameConfig, batch: int, steps: int, seed: int = 0):
    """Rows = (game, seat) streams: priv [B*P, T, D], publ [B*P, T, Dp], legal [B*P, T, A]."""
    tr = random_rollout(game, batch, steps, seed)
    priv, publ, legal = (torch.stack([x[i] for x in tr], 2).flatten(0, 1) for i in (1, 2, 3))
    return priv, publ, legal



# ---- networks ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(FULL_GAMES))
@pytest.mark.parametrize("kind", KINDS)
def test_shapes(kind: str, name: str) -> None:
    game = FULL_GAMES[name]
    net = small_net(game, kind, aux_head=True)
    priv, publ, legal = sequences(game, 2, 4)
    rows, t, a = priv.shape[0], priv.shape[1], game.num_actions
    assert rows == 2 * game.players and priv.shape[2] == game.private_dim and publ.shape[2] == game.public_dim
    hid = net.initial_state(rows)
    layers = 0 if kind == "ff" else SMALL["lstm_layers"]
    assert isinstance(hid, HiddenState) and hid.h.shape == hid.c.shape == (layers, rows, SMALL["hidden"])
    q, hid2 = net(priv, publ, legal, hid)
    assert q.shape == (rows, t, a) and q.dtype == torch.float32 and torch.isfinite(q).all()
    assert hid2.h.shape == hid.h.shape and hid2.c.shape == hid.c.shape
    qs, _ = net.step(priv[:, 0], publ[:, 0], legal[:, 0], hid)
    assert qs.shape == (rows, a)
    heads = net.forward_heads(priv, publ, legal, hid)
    assert torch.equal(heads.q, q) and heads.logits is heads.q  # no policy network: the moves are Q's
    assert torch.equal(net.forward_moves(priv, publ, legal, hid), q) and net.mover is net
    assert heads.aux.shape == (rows, t, game.hand_size, 3)
    # uint8 observations (as stored in replay) give the same Q as float ones
    q8, _ = net(priv.to(torch.uint8), publ.to(torch.uint8), legal, hid)
    assert torch.equal(q8, q)


def test_bad_inputs_raise() -> None:
    game = CONFIGS["p2_c2"]
    net = small_net(game, "publ_lstm")
    priv, publ, legal = sequences(game, 1, 2)
    hid = net.initial_state(priv.shape[0])
    with pytest.raises(ValueError, match="publ must be"):
        net(priv, priv, legal, hid)
    with pytest.raises(ValueError, match="legal must be"):
        net(priv, publ, legal[..., :-1], hid)
    with pytest.raises(ValueError, match=r"priv must be \[B, D\]"):
        net.step(priv, publ, legal, hid)
    assert net.forward_heads(priv, publ, legal, hid).aux is None  # no auxiliary head
    with pytest.raises(TypeError, match="private features"):
        small_net(game, "lstm").advance_public(publ, hid)


@pytest.mark.parametrize(
    "field,value",
    [("kind", "gru"), ("hidden", 0), ("lstm_layers", 1.5), ("mlp_layers", 0), ("aux_head", "yes"),
     ("dueling", 1), ("counting", "no"), ("hint_facts", 0), ("discard_facts", 1), ("policy_net", 1)],
)
def test_netconfig_validation(field: str, value) -> None:
    with pytest.raises(ValueError, match=f"NetConfig.{field}"):
        NetConfig(**{field: value})


@pytest.mark.parametrize("dueling", [True, False])
def test_dueling_mean_over_legal(dueling: bool) -> None:
    torch.manual_seed(0)
    head = QHead(16, 7, dueling)
    o = torch.randn(50, 16)
    legal = torch.rand(50, 7) < 0.5
    legal[:, 3] = True
    q = head(o, legal)
    if dueling:
        v = head.value(o).squeeze(-1)
        mean_legal = (q * legal).sum(-1) / legal.sum(-1)
        torch.testing.assert_close(mean_legal, v)
        # the advantage ordering is untouched; illegal entries are left unmasked (finite)
        assert torch.isfinite(q).all()
        assert torch.equal(greedy(q, legal), greedy(head.adv(o), legal))
    else:
        torch.testing.assert_close(q, head.adv(o))
    # changing which actions are legal shifts Q by one constant per row (only the mean moves)
    other = torch.ones_like(legal)
    diff = q - head(o, other)
    torch.testing.assert_close(diff, diff[:, :1].expand_as(diff))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind,facts", [(k, "plain") for k in KINDS] + [("publ_lstm", "counting"),
                                                                         ("publ_lstm", "hints")])
def test_sequence_equals_stepping(kind: str, facts: str, device: str) -> None:
    """On CUDA a single step runs as explicit LSTM cells and a sequence through cuDNN: the same function."""
    game = CONFIGS["p3"]
    net = small_net(game, kind, **FACTS[facts]).to(device)
    priv, publ, legal = (x.to(device) for x in sequences(game, 2, 6))
    hid0 = net.initial_state(priv.shape[0])
    with torch.no_grad(), tf32_matmuls(False):
        q_seq, hid_seq = net(priv, publ, legal, hid0)
        hid, qs = hid0, []
        for t in range(priv.shape[1]):
            q_t, hid = net.step(priv[:, t], publ[:, t], legal[:, t], hid)
            qs.append(q_t)
        # and in two chunks with the state carried over (how burn-in / chunked training uses it)
        q_a, hid_a = net(priv[:, :2], publ[:, :2], legal[:, :2], hid0)
        q_b, hid_b = net(priv[:, 2:], publ[:, 2:], legal[:, 2:], hid_a)
    torch.testing.assert_close(torch.stack(qs, 1), q_seq, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(hid, hid_seq, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat([q_a, q_b], 1), q_seq, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(hid_b, hid_seq, rtol=1e-5, atol=1e-5)


def test_lstm_cells_equal_torch_lstm() -> None:
    """The explicit one-step cells (what CUDA runs for a step) compute nn.LSTM's step exactly."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(12, 16, num_layers=3, batch_first=True)
    x, hid = torch.randn(9, 1, 12), (torch.randn(3, 9, 16), torch.randn(3, 9, 16))
    with torch.no_grad():
        out, (h, c) = lstm_cells(lstm, x, hid)
        ref, (h_ref, c_ref) = lstm(x, hid)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(h, h_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(c, c_ref, rtol=1e-5, atol=1e-6)


def _perturb_hands(game: GameConfig, priv: torch.Tensor, seed: int) -> torch.Tensor:
    """The same observation with the other players' cards replaced by random bits."""
    out = priv.clone()
    sl = game.layout.slices["hands.cards"]
    g = torch.Generator().manual_seed(seed)
    out[..., sl] = (torch.rand(out[..., sl].shape, generator=g) < 0.2).float()
    return out


@pytest.mark.parametrize("facts", list(FACTS))
@pytest.mark.parametrize("kind", KINDS)
def test_public_state_ignores_private_features(kind: str, facts: str) -> None:
    """Changing the other players' hands changes Q but, for publ_lstm, never the recurrent state (the
    card-count facts of a counting network included: the public ones read public features only)."""
    game = CONFIGS["p2"]
    net = small_net(game, kind, **FACTS[facts])
    priv, publ, legal = sequences(game, 2, 5)
    priv2 = _perturb_hands(game, priv, 3)
    assert torch.equal(public_features(game, priv2), publ) and not torch.equal(priv2, priv)
    hid0 = net.initial_state(priv.shape[0])
    with torch.no_grad():
        q1, h1 = net(priv, publ, legal, hid0)
        q2, h2 = net(priv2, publ, legal, hid0)
    assert not torch.allclose(q1, q2)
    if kind == "lstm":  # the control: a plain LSTM's state does see the private part
        assert not torch.allclose(h1.h, h2.h)
    else:
        assert torch.equal(h1.h, h2.h) and torch.equal(h1.c, h2.c)
        assert net.capabilities.public_state and net.capabilities.public_split


@pytest.mark.parametrize("facts", list(FACTS))
@pytest.mark.parametrize("kind", ["publ_lstm", "ff"])
def test_q_from_public_matches_forward(kind: str, facts: str) -> None:
    game = CONFIGS["p2"]
    net = small_net(game, kind, **FACTS[facts])
    priv, publ, legal = sequences(game, 2, 5)
    rows, k = priv.shape[0], 4
    hid0 = net.initial_state(rows)
    with torch.no_grad():
        q, hid = net(priv, publ, legal, hid0)
        out, hid_p = net.public_out(publ, hid0)
        torch.testing.assert_close(net.q_from_public(priv, out, legal), q, rtol=0, atol=0)
        assert torch.equal(hid_p.h, hid.h) and torch.equal(net.advance_public(publ, hid0).c, hid.c)
        # search: advance the public state once, score K candidate private observations against it
        cands = torch.stack([_perturb_hands(game, priv[:, -1], s) for s in range(k)], 1)  # [R, K, D]
        step_out, _ = net.public_out(publ[:, -1], hid_p)  # [R, hidden]
        q_k = net.q_from_public(cands, step_out[:, None], legal[:, -1, None].expand(-1, k, -1))
        rep = HiddenState(*(x.repeat_interleave(k, 1) for x in hid_p))
        q_ref, _ = net.step(cands.flatten(0, 1), publ[:, -1].repeat_interleave(k, 0),
                            legal[:, -1].repeat_interleave(k, 0), rep)
    assert q_k.shape == (rows, k, game.num_actions)
    torch.testing.assert_close(q_k.flatten(0, 1), q_ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_held_scores_make_the_policys_move_best_and_keep_every_lower_q(dtype: torch.dtype) -> None:
    """The step scores of a policy-head network: the greedy legal move is the policy's, its score is its Q
    (the value a leaf bootstraps with), a move Q ranks HOLD_GAP or more below it keeps its Q, and a move Q
    ranks above it is capped below it, also in half precision at full-game scores."""
    g = torch.Generator().manual_seed(0)
    q = (25 * torch.rand(4000, 9, generator=g)).to(dtype)
    logits = torch.randn(4000, 9, generator=g).to(dtype)
    legal = torch.rand(4000, 9, generator=g) < 0.6
    legal[:, 3] = True
    s = held_scores(q, logits, legal)
    move = greedy(logits, legal)
    assert torch.equal(greedy(s, legal), move)
    rows = torch.arange(4000)
    assert torch.equal(s[rows, move], q[rows, move])
    others = legal.clone()
    others[rows, move] = False
    best_other = s.float().masked_fill(~others, -1e9).amax(1)
    assert (best_other[others.any(1)] < q[rows, move].float()[others.any(1)]).all()
    low = q.float() <= q[rows, move].float()[:, None] - HOLD_GAP
    assert torch.equal(s[low & others], q[low & others])
    assert (~low & others).any() and (low & others).any()  # both kinds of move were checked


def test_a_policy_network_moves_by_its_policy_on_every_path() -> None:
    """A HeldQNet (NetConfig.policy_net): forward, step and q_from_public score the policy network's greedy
    move best, at Q's value of it; forward_heads gives Q and the policy's logits apart, forward_moves and the
    mover the policy's alone; the first-layer path of the range filter gives the policy's advantages (its
    logits up to a per-row constant)."""
    game = CONFIGS["p2"]
    net = small_net(game, "publ_lstm", counting=True, policy_net=True)
    priv, publ, legal = sequences(game, 3, 6)
    hid0 = net.initial_state(priv.shape[0])
    assert hid0.h.shape[0] == 2 * SMALL["lstm_layers"]  # Q's layers, then the policy's
    with torch.no_grad():
        scores, _ = net(priv, publ, legal, hid0)
        heads = net.forward_heads(priv, publ, legal, hid0)
        move = greedy(heads.logits, legal)
        assert torch.equal(greedy(scores, legal), move)
        assert not torch.equal(greedy(heads.q, legal), move)  # Q alone would move otherwise: the policy holds
        assert torch.equal(scores.gather(-1, move[..., None]), heads.q.gather(-1, move[..., None]))
        torch.testing.assert_close(heads.q, net.q(priv, publ, legal, net.q.initial_state(priv.shape[0]))[0])
        step, _ = net.step(priv[:, 0], publ[:, 0], legal[:, 0], hid0)
        assert torch.equal(greedy(step, legal[:, 0]), move[:, 0])
        # imitation's forward and the DAgger games read the policy network alone, to the same moves
        assert torch.equal(net.forward_moves(priv, publ, legal, hid0), heads.logits)
        assert net.mover is net.policy
        assert torch.equal(greedy(net.mover.step(priv[:, 0], publ[:, 0], legal[:, 0],
                                                 net.policy.initial_state(priv.shape[0]))[0], legal[:, 0]),
                           move[:, 0])
        out, _ = net.public_out(publ, hid0)
        torch.testing.assert_close(net.q_from_public(priv, out, legal), scores, rtol=0, atol=0)
        x = net.private_input_layer()(net.private_input(priv.flatten(0, 1)))
        adv = net.advantages_from_input_layer(x, out.flatten(0, 1))
        logits = heads.logits.flatten(0, 1)
        torch.testing.assert_close(adv - adv[:, :1], logits - logits[:, :1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["publ_lstm", "lstm"])
def test_a_policy_networks_moves_step_makes_steps_move_and_next_state(kind: str) -> None:
    """Blueprint.moves (what rollouts play): a HeldQNet's runs the policy and advances Q's state without its
    head (its public stream alone where it has one), and over a whole sequence it makes step's greedy move at
    every step with step's next state, bit for bit, so a leaf value read after it is step's; a network
    without a policy network moves by its step itself."""
    game = CONFIGS["p2"]
    net = small_net(game, kind, counting=True, policy_net=True)
    priv, publ, legal = sequences(game, 3, 8)
    hid_step = hid_moves = net.initial_state(priv.shape[0])
    with torch.no_grad():
        for t in range(priv.shape[1]):
            scores, hid_step = net.step(priv[:, t], publ[:, t], legal[:, t], hid_step)
            logits, hid_moves = net.moves(priv[:, t], publ[:, t], legal[:, t], hid_moves)
            assert torch.equal(greedy(logits, legal[:, t]), greedy(scores, legal[:, t])), t
            assert torch.equal(hid_moves.h, hid_step.h) and torch.equal(hid_moves.c, hid_step.c), t
        blind, hid_blind = net.moves(priv[:, 0], publ[:, 0], legal[:, 0], hid_step, values=False)
        scores, hid_next = net.step(priv[:, 0], publ[:, 0], legal[:, 0], hid_step)
        assert torch.equal(greedy(blind, legal[:, 0]), greedy(scores, legal[:, 0]))
        # values False: the policy's state advances as step's, Q's stays where it was (Q is not run)
        q_layers = net.q.layers
        assert torch.equal(hid_blind.h[q_layers:], hid_next.h[q_layers:])
        assert torch.equal(hid_blind.h[:q_layers], hid_step.h[:q_layers])
        plain = small_net(game, kind, counting=True)
        hid = plain.initial_state(priv.shape[0])
        a, b = plain.moves(priv[:, 0], publ[:, 0], legal[:, 0], hid), plain.step(priv[:, 0], publ[:, 0],
                                                                                  legal[:, 0], hid)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1].h, b[1].h)


# ---- deterministic double ------------------------------------------------------------------------
def test_fixed_qnet() -> None:
    game = CONFIGS["p2"]
    order = [game.hand_size + 2, 0, game.num_moves - 1]  # play slot 2, discard slot 0, the last hint
    net = FixedQNet(game, order)
    priv, publ, legal = sequences(game, 3, 4)
    hid = net.initial_state(priv.shape[0])
    q, hid2 = net(priv, publ, legal, hid)
    assert q.shape == legal.shape and torch.equal(hid2.h, hid.h + 4)
    act = greedy(q, legal)
    for idx in zip(*torch.nonzero(torch.ones(act.shape)).T.tolist(), strict=True):
        ids = legal[idx].nonzero().flatten().tolist()
        ranked = [a for a in order if a in ids] + [a for a in ids if a not in order]
        assert act[idx] == ranked[0]
    qs, hs = net.step(priv[:, 0], publ[:, 0], legal[:, 0], hid)
    assert torch.equal(qs, q[:, 0]) and torch.equal(hs.h, hid.h + 1)
    assert torch.equal(net.q_from_public(priv, None, legal), q)
    # a real Parameter: losses reach it (R2D2 tests), state_dict round-trips
    q.sum().backward()
    assert net.values.grad is not None and net.values.grad.abs().sum() > 0
    twin = FixedQNet(game)
    twin.load_state_dict(net.state_dict())
    assert torch.equal(twin.values, net.values)
    with pytest.raises(ValueError, match="distinct actions"):
        FixedQNet(game, [0, 0])
    with pytest.raises(ValueError, match="distinct actions"):
        FixedQNet(game, [game.num_actions])
