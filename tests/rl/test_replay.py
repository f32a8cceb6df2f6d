"""Prioritized sequence replay: sum tree, exact sampling distribution, IS weights, ring order, state."""

from __future__ import annotations

import io

import pytest
import torch

from lbs.rl.replay import (
    FieldSpec,
    PrioritizedReplay,
    ProportionalSampler,
    SumTree,
    UniformSampler,
    importance_weights,
)

T, P, D, A = 4, 2, 3, 5
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


def spec():
    return {
        "priv": ((T, P, D), torch.uint8, torch.float32),
        "legal": ((T, P, A), torch.bool),
        "action": ((T, P), torch.long),
        "reward": ((T,), torch.float32),
        "mask": ((T,), torch.bool),
    }


def episodes(ids):
    """Sentinel episodes: every field of episode k is filled with values derived from k."""
    ids = torch.as_tensor(ids)
    E = ids.numel()
    return {
        "priv": (ids % 256).to(torch.uint8)[:, None, None, None].expand(E, T, P, D).clone(),
        "legal": (ids % 2 == 0)[:, None, None, None].expand(E, T, P, A).clone(),
        "action": ids[:, None, None].expand(E, T, P).clone(),
        "reward": ids.float()[:, None].expand(E, T).clone(),
        "mask": torch.ones(E, T, dtype=torch.bool),
    }


def stored_ids(replay):
    return replay.storage["action"][:, 0, 0].tolist()


# ---------------------------------------------------------------- sum tree


@pytest.mark.parametrize("capacity", [1, 2, 5, 8, 13])
def test_sum_tree_totals_and_find_match_cumsum(capacity):
    g = torch.Generator().manual_seed(capacity)
    tree = SumTree(capacity)
    ref = torch.zeros(capacity, dtype=torch.float64)
    for _ in range(6):
        idx = torch.randint(0, capacity, (4,), generator=g)
        val = torch.rand(4, generator=g, dtype=torch.float64)
        tree.update(idx, val)
        for i, v in zip(idx.tolist(), val.tolist(), strict=True):  # sequential semantics: last write wins
            ref[i] = v
        assert tree.total().item() == pytest.approx(ref.sum().item(), rel=1e-12)
        torch.testing.assert_close(tree.get(torch.arange(capacity)), ref)
        # every internal node equals the sum of its children
        inner = torch.arange(1, tree.leaves)
        torch.testing.assert_close(tree.tree[inner], tree.tree[2 * inner] + tree.tree[2 * inner + 1])
    mass = torch.rand(1000, generator=g, dtype=torch.float64) * ref.sum()
    want = torch.searchsorted(ref.cumsum(0), mass, right=True)
    assert torch.equal(tree.find(mass), want)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_tree_duplicate_updates_keep_the_last_value(device):
    tree = SumTree(6, device)
    tree.update(torch.tensor([2, 4, 2, 2, 4], device=device), torch.tensor([1.0, 2.0, 3.0, 7.0, 5.0]))
    assert tree.get(torch.arange(6, device=device)).tolist() == [0.0, 0.0, 7.0, 0.0, 5.0, 0.0]
    assert tree.total().item() == 12.0
    assert (tree._last == -1).all()  # scratch is clean for the next call
    # many colliding writes (where unordered GPU scatters would race): still the last one
    idx = torch.arange(4000, device=device) % 3
    tree.update(idx, torch.arange(4000.0, device=device))
    assert tree.get(torch.arange(3, device=device)).tolist() == [3999.0, 3997.0, 3998.0]


def test_sum_tree_never_returns_empty_leaves_at_boundaries():
    tree = SumTree(8)
    tree.update(torch.tensor([1, 5]), torch.tensor([0.3, 0.1], dtype=torch.float64))
    total = tree.total().item()
    mass = torch.tensor([0.0, 0.3, 0.3 - 1e-17, 0.4, total, total * (1 - 1e-16), 10.0], dtype=torch.float64)
    got = tree.find(mass)
    assert set(got.tolist()) <= {1, 5}
    assert got[0] == 1 and got[1] == 5


# ---------------------------------------------------------------- sampling


def chi_square(counts, probs):
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


# chi-square 0.999 quantile for 9 degrees of freedom: a correct sampler fails this ~1 seed in 1000
CHI2_999_DF9 = 27.88


@pytest.mark.parametrize(("alpha", "device"), [(0.9, "cpu"), (0.0, "cpu"), (1.0, "cpu"),
                                               pytest.param(0.9, "cuda", marks=CUDA)])
def test_proportional_sampling_matches_exact_distribution(alpha, device):
    cap = 10
    replay = PrioritizedReplay(cap, spec(), device=device, alpha=alpha, seed=123)
    prios = torch.tensor([0.1, 2.0, 0.5, 1.0, 3.0, 0.05, 1.5, 0.7, 0.2, 4.0])
    replay.add(episodes(range(cap)), prios)
    exact = prios.double() ** alpha / (prios.double() ** alpha).sum()
    counts = torch.zeros(cap, dtype=torch.float64)
    for _ in range(20):
        _, idx, _ = replay.sample(2000)
        counts += torch.bincount(idx, minlength=cap).cpu()
    assert chi_square(counts, exact) < CHI2_999_DF9
    # and the sampler reports those exact probabilities
    idx, probs = replay.sampler.sample(torch.rand(50, dtype=torch.float64, device=device), cap)
    torch.testing.assert_close(probs.cpu(), exact[idx.cpu()])


def test_sampling_reaches_only_filled_slots_and_uniform_sampler_is_uniform():
    replay = PrioritizedReplay(16, spec(), seed=5)
    replay.add(episodes(range(5)), torch.full((5,), 1.0))
    _, idx, _ = replay.sample(4000)
    assert idx.min() >= 0 and idx.max() < 5
    uni = PrioritizedReplay(16, spec(), seed=5, sampler=UniformSampler(16))
    uni.add(episodes(range(10)), torch.linspace(0.1, 100.0, 10))
    counts = torch.zeros(10, dtype=torch.float64)
    for _ in range(10):
        _, idx, w = uni.sample(2000)
        counts += torch.bincount(idx, minlength=10)
        assert (w == 1.0).all()
    assert chi_square(counts, torch.full((10,), 0.1, dtype=torch.float64)) < CHI2_999_DF9


def test_is_weights_match_plain_formula():
    alpha, beta, cap = 0.9, 0.6, 7
    replay = PrioritizedReplay(cap, spec(), alpha=alpha, beta=beta, seed=9)
    prios = torch.tensor([0.5, 1.0, 2.0, 4.0, 0.25, 3.0, 1.5])
    replay.add(episodes(range(cap)), prios)
    _, idx, w = replay.sample(64)
    probs = [float(prios[i]) ** alpha / sum(float(p) ** alpha for p in prios) for i in idx.tolist()]
    raw = [(cap * p) ** -beta for p in probs]
    want = torch.tensor([r / max(raw) for r in raw])
    torch.testing.assert_close(w, want.float())
    assert w.dtype == torch.float32 and w.max() == 1.0
    # beta override and the standalone helper agree
    _, idx, w0 = replay.sample(8, beta=0.0)
    assert (w0 == 1.0).all()
    torch.testing.assert_close(importance_weights(torch.tensor([0.5, 0.25], dtype=torch.float64), 2, 1.0),
                               torch.tensor([0.5, 1.0]))


def test_sampled_batch_holds_the_drawn_episodes_with_sample_dtypes():
    replay = PrioritizedReplay(6, spec(), seed=1)
    replay.add(episodes([10, 11, 12, 13]), torch.ones(4))
    batch, idx, _ = replay.sample(32)
    assert batch["priv"].dtype == torch.float32 and batch["priv"].shape == (32, T, P, D)
    assert batch["legal"].dtype == torch.bool and batch["action"].dtype == torch.long
    ids = (idx + 10).float()
    assert torch.equal(batch["priv"], ids[:, None, None, None].expand(32, T, P, D))
    assert torch.equal(batch["reward"], ids[:, None].expand(32, T))
    assert torch.equal(batch["legal"][:, 0, 0, 0], (idx + 10) % 2 == 0)


def test_same_seed_same_samples():
    a, b = PrioritizedReplay(8, spec(), seed=3), PrioritizedReplay(8, spec(), seed=3)
    c = PrioritizedReplay(8, spec(), seed=4)
    for r in (a, b, c):
        r.add(episodes(range(8)), torch.arange(1.0, 9.0))
    ia, ib, ic = a.sample(64)[1], b.sample(64)[1], c.sample(64)[1]
    assert torch.equal(ia, ib) and not torch.equal(ia, ic)
    assert not torch.equal(a.sample(64)[1], ia)  # the counter advances


@CUDA
def test_same_seed_same_samples_on_cpu_and_cuda():
    cpu, gpu = PrioritizedReplay(8, spec(), seed=3), PrioritizedReplay(8, spec(), device="cuda", seed=3)
    for r in (cpu, gpu):
        r.add(episodes(range(8)), torch.arange(1.0, 9.0))
    (bc, ic, wc), (bg, ig, wg) = cpu.sample(256), gpu.sample(256)
    assert torch.equal(ic, ig.cpu()) and torch.equal(wc, wg.cpu())
    assert bg["priv"].device.type == "cuda" and torch.equal(bc["priv"], bg["priv"].cpu())


def test_update_priorities_changes_distribution_last_duplicate_wins():
    replay = PrioritizedReplay(4, spec(), alpha=1.0, seed=0)
    replay.add(episodes(range(4)), torch.ones(4))
    replay.update_priorities(torch.tensor([0, 1, 0, 2]), torch.tensor([5.0, 0.0, 3.0, 1.0]))
    leaves = replay.sampler.tree.get(torch.arange(4))
    torch.testing.assert_close(leaves, torch.tensor([3.0, 1e-6, 1.0, 1.0], dtype=torch.float64))
    assert replay.sampler.tree.total().item() == pytest.approx(5.0 + 1e-6)


# ---------------------------------------------------------------- ring buffer


def test_ring_buffer_overwrites_oldest_in_order():
    replay = PrioritizedReplay(3, spec())
    slots = replay.add(episodes([0, 1]), torch.ones(2))
    assert slots.tolist() == [0, 1] and len(replay) == 2 and replay.pos == 2
    slots = replay.add(episodes([2, 3]), torch.tensor([1.0, 9.0]))
    assert slots.tolist() == [2, 0] and stored_ids(replay) == [3, 1, 2] and len(replay) == 3
    # episode 3 replaced episode 0 and took its slot's priority
    assert replay.sampler.tree.get(torch.tensor([0])).item() == pytest.approx(9.0**0.9)
    # more than capacity at once: as if added one at a time, only the last three survive
    replay.add(episodes([4, 5, 6, 7, 8]), torch.arange(1.0, 6.0))
    ref = [3, 1, 2]
    pos = 1
    for k in [4, 5, 6, 7, 8]:
        ref[pos] = k
        pos = (pos + 1) % 3
    assert stored_ids(replay) == ref and replay.pos == pos and replay.num_added == 9


# ---------------------------------------------------------------- state, memory, errors


@pytest.mark.parametrize("device", DEVICES)
def test_state_dict_round_trip_continues_identically(device):
    replay = PrioritizedReplay(5, spec(), device=device, seed=7)
    replay.add(episodes(range(7)), torch.arange(1.0, 8.0))
    replay.sample(10)
    buf = io.BytesIO()
    torch.save(replay.state_dict(), buf)
    buf.seek(0)
    clone = PrioritizedReplay(5, spec(), device=device, seed=0)
    clone.load_state_dict(torch.load(buf))
    assert (clone.pos, clone.size, clone.num_added, clone.num_sampled) == (2, 5, 7, 10)
    for r in (replay, clone):
        r.add({k: v.to(device) for k, v in episodes([20]).items()}, torch.tensor([2.0], device=device))
        r.update_priorities(torch.tensor([1, 3], device=device), torch.tensor([0.5, 6.0], device=device))
    (b1, i1, w1), (b2, i2, w2) = replay.sample(16), clone.sample(16)
    assert torch.equal(i1, i2) and torch.equal(w1, w2)
    assert all(torch.equal(b1[k], b2[k]) for k in b1)


def test_state_dict_without_contents_keeps_counters_and_empties():
    replay = PrioritizedReplay(5, spec(), seed=7)
    replay.add(episodes(range(3)), torch.ones(3))
    replay.sample(4)
    state = replay.state_dict(include_data=False)
    assert "storage" not in state
    clone = PrioritizedReplay(5, spec())
    clone.add(episodes(range(2)), torch.ones(2))
    clone.load_state_dict(state)
    assert len(clone) == 0 and clone.num_added == 3 and clone.num_sampled == 4
    assert clone.sampler.tree.total().item() == 0.0
    with pytest.raises(RuntimeError, match="empty"):
        clone.sample(1)
    other = PrioritizedReplay(6, spec())
    with pytest.raises(ValueError, match="does not match"):
        other.load_state_dict(replay.state_dict())


def test_bytes_per_episode():
    replay = PrioritizedReplay(2, spec())
    want = T * P * D * 1 + T * P * A * 1 + T * P * 8 + T * 4 + T * 1
    assert replay.bytes_per_episode() == want
    assert FieldSpec((T, P, D), torch.uint8).bytes == T * P * D


def test_bad_inputs_raise_clear_errors():
    replay = PrioritizedReplay(4, spec(), checked=True)
    good = episodes([0, 1])
    with pytest.raises(TypeError, match="'priv' has dtype torch.float32"):
        replay.add({**good, "priv": good["priv"].float()}, torch.ones(2))
    with pytest.raises(ValueError, match="'legal' has shape"):
        replay.add({**good, "legal": good["legal"][:, :, :, :2]}, torch.ones(2))
    with pytest.raises(KeyError, match="missing \\['mask'\\]"):
        replay.add({k: v for k, v in good.items() if k != "mask"}, torch.ones(2))
    with pytest.raises(KeyError, match="unknown \\['extra'\\]"):
        replay.add({**good, "extra": torch.zeros(2)}, torch.ones(2))
    with pytest.raises(ValueError, match="holds 1 episodes"):
        replay.add({**good, "reward": good["reward"][:1]}, torch.ones(2))
    with pytest.raises(ValueError, match="priorities must be a tensor of shape \\[2\\]"):
        replay.add(good, torch.ones(3))
    with pytest.raises(ValueError, match="finite and >= 0"):
        replay.add(good, torch.tensor([1.0, float("nan")]))
    with pytest.raises(RuntimeError, match="empty"):
        replay.sample(2)
    replay.add(good, torch.ones(2))
    with pytest.raises(IndexError, match="outside"):
        replay.update_priorities(torch.tensor([3]), torch.ones(1))
    with pytest.raises(ValueError, match="equal 1-d shapes"):
        replay.update_priorities(torch.tensor([0, 1]), torch.ones(1))
    with pytest.raises(ValueError, match="shape must be positive"):
        PrioritizedReplay(4, {"x": ((0,), torch.bool)})
    with pytest.raises(TypeError, match="expected FieldSpec"):
        PrioritizedReplay(4, {"x": (3,)})
    with pytest.raises(ValueError, match="capacity"):
        PrioritizedReplay(0, spec())
    with pytest.raises(ValueError, match="alpha"):
        ProportionalSampler(4, alpha=-1.0)
