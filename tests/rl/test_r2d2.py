"""R2D2/VDN maths against hand-computed values and slow per-player, per-step references."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbs.models.qnet import Heads
from lbs.rl.r2d2 import (
    apex_epsilons,
    double_q_bootstrap,
    gather_actions,
    huber,
    masked_huber_loss,
    n_step_targets,
    r2d2_loss,
    sequence_priorities,
    td_errors,
    vdn_sum,
)


def slow_n_step(rewards, mask, bootstrap, gamma, n):
    """Per-element reference: plain Python over (b, t, k)."""
    B, T = rewards.shape
    out = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        length = int(mask[b].sum())
        for t in range(length):
            acc = sum(gamma**k * float(rewards[b, t + k]) for k in range(n) if t + k < length)
            if t + n < length:
                acc += gamma**n * float(bootstrap[b, t + n])
            out[b, t] = acc
    return out


def test_n_step_hand_example_with_episode_end_inside_window():
    rewards = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]])
    boot = torch.tensor([[10.0, 20.0, 30.0, 40.0, 50.0]])
    mask = torch.tensor([[True, True, True, True, False]])  # 4 valid steps; step 4 is padding
    got = n_step_targets(rewards, mask, boot, gamma=0.5, n=2)
    # t0: 1 + .5*2 + .25*30; t1: 2 + .5*3 + .25*40; t2: 3 + .5*4 (t+2 = 4 is past the end);
    # t3: 4 (reward of the padding step is ignored); t4: padding -> 0
    want = torch.tensor([[9.5, 13.5, 5.0, 4.0, 0.0]])
    torch.testing.assert_close(got, want)


def test_n_step_one_step_is_plain_td_target():
    rewards = torch.tensor([[0.0, 1.0, 1.0]])
    boot = torch.tensor([[7.0, 8.0, 9.0]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    got = n_step_targets(rewards, mask, boot, gamma=0.9, n=1)
    torch.testing.assert_close(got, torch.tensor([[0.0 + 0.9 * 8.0, 1.0 + 0.9 * 9.0, 1.0]]))


@pytest.mark.parametrize("n", [1, 3, 5])
def test_n_step_matches_slow_reference(n):
    g = torch.Generator().manual_seed(n)
    B, T = 6, 9
    rewards = torch.randn(B, T, generator=g, dtype=torch.float64)
    boot = torch.randn(B, T, generator=g, dtype=torch.float64)
    lengths = torch.tensor([0, 1, 2, 5, 8, 9])
    mask = torch.arange(T)[None] < lengths[:, None]
    got = n_step_targets(rewards, mask, boot, gamma=0.97, n=n)
    torch.testing.assert_close(got, slow_n_step(rewards, mask, boot, 0.97, n))


def test_n_step_rejects_bad_n():
    with pytest.raises(ValueError, match="n must be >= 1"):
        n_step_targets(torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool), torch.zeros(1, 2), 0.9, 0)


def test_double_q_uses_online_legal_argmax_and_target_values():
    # one step, two players, four actions
    online = torch.tensor([[[[5.0, 1.0, 3.0, 0.0], [0.0, 9.0, 2.0, 8.0]]]])  # [1, 1, 2, 4]
    target = torch.tensor([[[[100.0, 10.0, 20.0, 30.0], [40.0, 50.0, 60.0, 70.0]]]])
    legal = torch.tensor([[[[False, True, True, False], [True, False, False, True]]]])
    # player 0: best legal online is action 2 (3.0 > 1.0; action 0 is illegal) -> target 20
    # player 1: best legal online is action 3 (8.0; action 1 is illegal) -> target 70
    got = double_q_bootstrap(online, target, legal)
    torch.testing.assert_close(got, torch.tensor([[90.0]]))


def test_double_q_ignores_infinite_illegal_values_and_empty_rows():
    online = torch.tensor([[[[-float("inf"), 1.0, 2.0]], [[0.0, 0.0, 0.0]]]])  # [1, 2, 1, 3]
    target = torch.tensor([[[[-float("inf"), 4.0, 5.0]], [[1.0, 2.0, 3.0]]]])
    legal = torch.tensor([[[[False, True, True]], [[False, False, False]]]])  # step 1: padding
    got = double_q_bootstrap(online, target, legal)
    assert torch.isfinite(got).all()
    assert got[0, 0] == 5.0


def test_gather_and_vdn_sum():
    q = torch.arange(24, dtype=torch.float32).reshape(1, 2, 3, 4)  # [B, T, P, A]
    action = torch.tensor([[[0, 1, 3], [2, 2, 0]]])
    taken = gather_actions(q, action)
    torch.testing.assert_close(taken, torch.tensor([[[0.0, 5.0, 11.0], [14.0, 18.0, 20.0]]]))
    torch.testing.assert_close(vdn_sum(taken), torch.tensor([[16.0, 52.0]]))


def test_huber_values():
    x = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.5, 2.0])
    torch.testing.assert_close(huber(x), torch.tensor([2.5, 0.5, 0.125, 0.0, 0.125, 1.5]))
    torch.testing.assert_close(huber(x, delta=2.0), torch.tensor([4.0, 0.5, 0.125, 0.0, 0.125, 2.0]))


def test_masked_huber_loss_sums_valid_steps_and_weights_sequences():
    td = torch.tensor([[0.5, -2.0, 99.0], [1.0, 0.0, 3.0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    w = torch.tensor([0.5, 1.0])
    # row 0: .125 + 1.5 = 1.625 (* .5); row 1: .5 + 0 + 2.5 = 3.0
    torch.testing.assert_close(masked_huber_loss(td, mask, w), torch.tensor((0.8125 + 3.0) / 2))


def test_td_errors_masked_and_target_detached():
    q = torch.tensor([[1.0, 2.0]], requires_grad=True)
    tgt = torch.tensor([[3.0, 5.0]], requires_grad=True)
    td = td_errors(q, tgt, torch.tensor([[True, False]]))
    torch.testing.assert_close(td, torch.tensor([[2.0, 0.0]]))
    td.sum().backward()
    assert tgt.grad is None and q.grad.tolist() == [[-1.0, 0.0]]


def test_sequence_priorities_formula():
    td = torch.tensor([[1.0, -3.0, 2.0, 100.0], [0.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, False], [False, False, False, False]])
    got = sequence_priorities(td, mask, eta=0.9)
    torch.testing.assert_close(got, torch.tensor([0.9 * 3.0 + 0.1 * 2.0, 0.0]))
    torch.testing.assert_close(sequence_priorities(td, mask, eta=0.0)[0], torch.tensor(2.0))


def test_apex_epsilons():
    torch.testing.assert_close(apex_epsilons(1), torch.tensor([0.1]))
    eps = apex_epsilons(8)
    want = torch.tensor([0.1 ** (1 + 7 * i / 7) for i in range(8)])
    torch.testing.assert_close(eps, want)
    assert eps[0] == pytest.approx(0.1) and eps[-1] == pytest.approx(1e-8)
    assert (eps[1:] < eps[:-1]).all()
    with pytest.raises(ValueError, match="n must be >= 1"):
        apex_epsilons(0)


class TinyQNet(nn.Module):
    """Deterministic recurrent double: h_t = tanh(W x_t + h_{t-1}); q_t = V h_t, illegal moves at -1e9.

    forward_heads -> (q, logits (q itself), aux [N, T, H, K] or None, hid), as lbs.models.qnet.QNet's.
    """

    def __init__(self, d_priv, d_publ, actions, hidden=6, seed=0, aux=None):
        super().__init__()
        torch.manual_seed(seed)
        self.inp = nn.Linear(d_priv + d_publ, hidden)
        self.out = nn.Linear(hidden, actions)
        self.aux = None if aux is None else nn.Linear(hidden, aux[0] * aux[1])
        self.aux_shape = aux
        self.hidden = hidden

    def initial_state(self, batch, device):
        return torch.zeros(batch, self.hidden, device=device)

    def _hidden(self, priv, publ, hid):
        xs = self.inp(torch.cat([priv, publ], -1))  # [N, T, hidden]
        hs = []
        for t in range(xs.shape[1]):
            hid = torch.tanh(xs[:, t] + hid)
            hs.append(hid)
        return torch.stack(hs, 1), hid

    def forward(self, priv, publ, legal, hid):
        h, hid = self._hidden(priv, publ, hid)
        return self.out(h).masked_fill(~legal, -1e9), hid

    def forward_heads(self, priv, publ, legal, hid):
        h, hid = self._hidden(priv, publ, hid)
        q = self.out(h).masked_fill(~legal, -1e9)
        aux = None if self.aux is None else self.aux(h).reshape(*h.shape[:2], *self.aux_shape)
        return Heads(q, q, aux, hid)


def make_batch(B=3, T=5, P=2, D=7, A=4, seed=0, with_publ=True):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = torch.arange(T)[None] < lengths[:, None]
    legal = torch.rand(B, T, P, A, generator=g) < 0.6
    legal[..., -1] = True  # the no-op is always legal here
    legal &= mask[:, :, None, None]
    action = torch.where(legal, torch.rand(B, T, P, A, generator=g), -1.0).argmax(-1)
    batch = {
        "priv": torch.rand(B, T, P, D, generator=g),
        "legal": legal,
        "action": action,
        "reward": torch.randint(-1, 2, (B, T), generator=g).float() * mask,
        "mask": mask,
    }
    if with_publ:
        batch["publ"] = batch["priv"][..., 2:]
    return batch


def slow_loss(online, target, batch, weights, gamma, n, eta):
    """Reference: each (episode, player) run separately, plain loops over steps."""
    B, T, P, A = batch["legal"].shape
    q_on = torch.zeros(B, T, P, A)
    q_tg = torch.zeros(B, T, P, A)
    with torch.no_grad():
        for b in range(B):
            for p in range(P):
                args = tuple(batch[k][b:b + 1, :, p] for k in ("priv", "publ", "legal"))
                q_on[b, :, p] = online(*args, online.initial_state(1, "cpu"))[0][0]
                q_tg[b, :, p] = target(*args, target.initial_state(1, "cpu"))[0][0]
    loss, prios = 0.0, []
    for b in range(B):
        length = int(batch["mask"][b].sum())
        tds = []
        for t in range(length):
            q = sum(float(q_on[b, t, p, batch["action"][b, t, p]]) for p in range(P))
            tgt = sum(gamma**k * float(batch["reward"][b, t + k]) for k in range(n) if t + k < length)
            if t + n < length:
                boot = 0.0
                for p in range(P):
                    legal_q = [(float(q_on[b, t + n, p, a]), a) for a in range(A)
                               if batch["legal"][b, t + n, p, a]]
                    boot += float(q_tg[b, t + n, p, max(legal_q)[1]])
                tgt += gamma**n * boot
            tds.append(tgt - q)
        hub = sum(0.5 * d * d if abs(d) <= 1 else abs(d) - 0.5 for d in tds)
        loss += float(weights[b]) * hub / B
        abs_td = [abs(d) for d in tds]
        prios.append(eta * max(abs_td) + (1 - eta) * sum(abs_td) / len(abs_td))
    return loss, torch.tensor(prios)


def test_r2d2_loss_matches_per_player_reference_and_trains_only_online_net():
    batch = make_batch()
    D, Dp, A = batch["priv"].shape[-1], batch["publ"].shape[-1], batch["legal"].shape[-1]
    online, target = TinyQNet(D, Dp, A, seed=1), TinyQNet(D, Dp, A, seed=2)
    weights = torch.tensor([1.0, 0.5, 0.25])
    loss, prios, stats = r2d2_loss(online, target, batch, weights, gamma=0.9, n=2, eta=0.9)
    want_loss, want_prios = slow_loss(online, target, batch, weights, 0.9, 2, 0.9)
    assert loss.dim() == 0 and prios.shape == (3,)
    assert loss.item() == pytest.approx(want_loss, rel=1e-5)
    torch.testing.assert_close(prios, want_prios, rtol=1e-5, atol=1e-6)
    assert not prios.requires_grad and all(not v.requires_grad for v in stats.values())
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in online.parameters())
    assert all(p.grad is None for p in target.parameters())
    assert torch.isfinite(stats["q_taken"]) and stats["loss"] == loss.detach()


def test_r2d2_loss_derives_publ_and_requires_a_source():
    batch = make_batch(seed=3)
    D, Dp, A = batch["priv"].shape[-1], batch["publ"].shape[-1], batch["legal"].shape[-1]
    online, target = TinyQNet(D, Dp, A, seed=1), TinyQNet(D, Dp, A, seed=2)
    w = torch.ones(3)
    with_publ = r2d2_loss(online, target, batch, w)[0]
    del batch["publ"]
    derived = r2d2_loss(online, target, batch, w, public_fn=lambda x: x[..., 2:])[0]
    torch.testing.assert_close(with_publ, derived)
    with pytest.raises(KeyError, match="publ"):
        r2d2_loss(online, target, batch, w)


def test_r2d2_loss_adds_aux_cross_entropy_when_net_has_aux_head():
    H, K = 3, 3
    batch = make_batch(seed=4)
    B, T, P, _ = batch["legal"].shape
    D, Dp, A = batch["priv"].shape[-1], batch["publ"].shape[-1], batch["legal"].shape[-1]
    plain = TinyQNet(D, Dp, A, seed=1)
    online, target = TinyQNet(D, Dp, A, seed=1, aux=(H, K)), TinyQNet(D, Dp, A, seed=2)
    g = torch.Generator().manual_seed(0)
    aux_target = torch.randint(-1, K, (B, T, P, H), generator=g)
    w = torch.ones(B)
    with pytest.raises(KeyError, match="aux_target"):
        r2d2_loss(online, target, batch, w)
    batch["aux_target"] = aux_target
    loss, _, stats = r2d2_loss(online, target, batch, w, aux_weight=0.5)
    rl_loss = r2d2_loss(plain, target, batch, w)[0]  # same Q weights (same seed), no aux head
    # reference aux: mean cross-entropy over valid steps and real cards
    rows = [batch[k].transpose(1, 2).flatten(0, 1) for k in ("priv", "publ", "legal")]
    logits = online.forward_heads(*rows, online.initial_state(B * P, "cpu")).aux
    logits = logits.reshape(B, P, T, H, K).transpose(1, 2)  # [B, T, P, H, K]
    terms = []
    for b in range(B):
        for t in range(T):
            for p in range(P):
                for h in range(H):
                    c = int(aux_target[b, t, p, h])
                    if batch["mask"][b, t] and c >= 0:
                        terms.append(-torch.log_softmax(logits[b, t, p, h], -1)[c])
    want_aux = torch.stack(terms).mean()
    torch.testing.assert_close(stats["aux_loss"], want_aux.detach())
    torch.testing.assert_close(loss.detach(), rl_loss.detach() + 0.5 * want_aux.detach())
    # aux_weight=0 trains without the auxiliary head and needs no target
    del batch["aux_target"]
    torch.testing.assert_close(r2d2_loss(online, target, batch, w, aux_weight=0.0)[0], rl_loss)


def test_r2d2_loss_rejects_inconsistent_shapes():
    batch = make_batch()
    net = TinyQNet(7, 5, 4)
    batch["action"] = batch["action"][:, :, :1]
    with pytest.raises(ValueError, match="disagree"):
        r2d2_loss(net, net, batch, torch.ones(3))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_r2d2_loss_same_on_cuda():
    batch = make_batch(seed=5)
    online, target = TinyQNet(7, 5, 4, seed=1), TinyQNet(7, 5, 4, seed=2)
    w = torch.tensor([1.0, 0.5, 0.25])
    cpu = r2d2_loss(online, target, batch, w)
    gpu = r2d2_loss(online.cuda(), target.cuda(), {k: v.cuda() for k, v in batch.items()}, w.cuda())
    torch.testing.assert_close(gpu[0].cpu(), cpu[0])
    torch.testing.assert_close(gpu[1].cpu(), cpu[1])
