"""InferenceServer: served calls equal the module's own, inline without a merging worker and merged with
one, atomic weight updates, exploration independent of batching, errors reach the right caller, clean
shutdown; and no code calls a model by a method name in a string."""

from __future__ import annotations

import ast
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
import torch
from conftest import CONFIGS
from torch import nn

from lbs.acting import epsilon_greedy, greedy, play
from lbs.bots import SmartBot
from lbs.hanabi import GameConfig, engine
from lbs.infer import QNET, InferenceServer, ServerConfig
from lbs.models import FixedQNet, HiddenState, NetConfig, make_qnet
from lbs.models.qnet import select_rows

GAME = CONFIGS["p2_c2"]
A = GAME.num_actions
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def small_net(kind: str = "publ_lstm", seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return make_qnet(GAME, NetConfig(kind=kind, hidden=32, lstm_layers=2, mlp_layers=2)).eval()


def inputs(b: int, seed: int, t: int | None = None):
    """Random observation-shaped rows: priv, publ, legal (some actions always legal), hid."""
    g = torch.Generator().manual_seed(seed)
    lead = (b,) if t is None else (b, t)
    priv = (torch.rand(*lead, GAME.private_dim, generator=g) < 0.3).float()
    publ = priv[..., GAME.private_dim - GAME.public_dim:]
    legal = torch.rand(*lead, A, generator=g) < 0.5
    legal[..., 0] = True
    h = torch.randn(2, b, 32, generator=g)
    return priv, publ, legal, HiddenState(h, torch.randn(2, b, 32, generator=g))


def step(net: nn.Module, *args):
    """What the server runs for QNetHandle.step, for the tests that queue calls themselves."""
    return net.step(*args)


def forward(net: nn.Module, *args):
    return net(*args)


MERGE = ServerConfig(coalesce=True)


def near(a, b, tol: float = 1e-5) -> bool:
    return torch.allclose(a, b, rtol=tol, atol=tol)


class Gate(nn.Module):
    """Blocks the worker inside a forward pass until released, so queued calls pile up behind it."""

    def __init__(self):
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()

    def __deepcopy__(self, memo: dict) -> Gate:
        return self  # the server's copy must share the events with the test

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.entered.set()
        assert self.release.wait(30)
        return x


class Picky(nn.Module):
    """Fails on negative inputs: a value-dependent error inside a merged batch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool((x < 0).any()):
            raise ValueError("negative input")
        return x * 2


class WeightSum(nn.Module):
    """Output = sum of every weight, read tensor by tensor: a half-updated model gives a mixed sum."""

    def __init__(self, tensors: int = 48, size: int = 64):
        super().__init__()
        self.ws = nn.ParameterList([nn.Parameter(torch.zeros(size)) for _ in range(tensors)])
        self.numel = tensors * size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = torch.zeros((), device=x.device)
        for w in self.ws:
            total = total + w.sum()
        return x * 0 + total


def wait_until_idle(server: InferenceServer, gate: Gate) -> Future:
    """Submit a gate call and wait until the worker is blocked inside it."""
    gate.entered.clear()
    gate.release.clear()
    fut = server.submit("gate", forward, torch.zeros(1, 1))
    assert gate.entered.wait(10)
    return fut


# ---- correctness of served calls ----------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("coalesce", [False, True])
def test_served_equals_module(device: str, coalesce: bool) -> None:
    net = small_net()
    priv, publ, legal, hid = inputs(5, 0)
    with InferenceServer(net, device, ServerConfig(coalesce=coalesce)) as server:
        qnet = server.qnet()
        q, h = qnet.step(priv, publ, legal, hid)
        qs, hs = qnet.forward(priv[:, None].expand(-1, 3, -1), publ[:, None].expand(-1, 3, -1),
                              legal[:, None].expand(-1, 3, -1), hid)
        h0 = qnet.initial_state(5)
        out, hp = qnet.public_out(publ, hid)
        q_pub = qnet.q_from_public(priv, out, legal)
    with torch.no_grad():
        q_ref, h_ref = net.step(priv, publ, legal, hid)
        qs_ref, _ = net(priv[:, None].expand(-1, 3, -1), publ[:, None].expand(-1, 3, -1),
                        legal[:, None].expand(-1, 3, -1), hid)
        out_ref, _ = net.public_out(publ, hid)
        q_pub_ref = net.q_from_public(priv, out_ref, legal)
    assert isinstance(h, HiddenState) and h.h.device.type == device
    assert near(q.cpu(), q_ref) and near(h.h.cpu(), h_ref.h) and near(h.c.cpu(), h_ref.c)
    assert near(qs.cpu(), qs_ref) and near(out.cpu(), out_ref) and isinstance(hp, HiddenState)
    assert near(q_pub.cpu(), q_pub_ref)
    assert h0.h.shape == (2, 5, 32) and not h0.h.any()


def test_feed_forward_state_passes_through_batching() -> None:
    """The ff net's zero-layer state [0, B, hidden] batches and splits like any other state."""
    net = small_net("ff")
    reqs = [inputs(b, 20 + b)[:3] for b in (2, 3)]
    with InferenceServer(net, cfg=MERGE) as server:
        gate = Gate()
        server.register("gate", gate)
        gate_future = wait_until_idle(server, gate)
        futures = [server.submit(QNET, step, *r, server.qnet().initial_state(r[0].shape[0])) for r in reqs]
        gate.release.set()
        gate_future.result(10)
        for r, f in zip(reqs, futures, strict=True):
            q, h = f.result(10)
            b = r[0].shape[0]
            assert h.h.shape == (0, b, 32) and near(q, net.step(*r, net.initial_state(b))[0].detach())
        assert server.stats.batches == 2  # the gate, then both ff requests together


def test_server_owns_a_copy() -> None:
    net = small_net()
    priv, publ, legal, hid = inputs(3, 1)
    with InferenceServer(net) as server:
        before, _ = server.qnet().step(priv, publ, legal, hid)
        with torch.no_grad():
            for p in net.parameters():
                p.add_(1.0)  # the learner keeps training its own module
        after, _ = server.qnet().step(priv, publ, legal, hid)
        assert torch.equal(before, after) and server.version == 0
        assert server.update_weights(net.state_dict()) == 1 and server.version == 1
        updated, _ = server.qnet().step(priv, publ, legal, hid)
        with torch.no_grad():
            assert near(updated, net.step(priv, publ, legal, hid)[0])
        served = server.state_dict()
        assert all(torch.equal(served[k], v) for k, v in net.state_dict().items())


def test_coalesced_threads_equal_direct() -> None:
    """Many threads, random batch sizes and mixed methods: each caller gets exactly its own rows."""
    net = small_net()
    n_threads, calls = 6, 6
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)
    server = InferenceServer(net, cfg=MERGE)
    qnet = server.qnet()

    def worker(k: int) -> None:
        try:
            g = torch.Generator().manual_seed(k)
            start.wait()
            for c in range(calls):
                b = int(torch.randint(1, 7, (1,), generator=g))
                seq = c % 3 == 2
                priv, publ, legal, hid = inputs(b, 100 * k + c, t=4 if seq else None)
                q, h = (qnet.forward if seq else qnet.step)(priv, publ, legal, hid)
                with torch.no_grad():
                    q_ref, h_ref = net(priv, publ, legal, hid) if seq else net.step(priv, publ, legal, hid)
                assert q.shape == q_ref.shape and h.h.shape == (2, b, 32) and h.h.is_contiguous()
                assert near(q, q_ref) and near(h.h, h_ref.h) and near(h.c, h_ref.c)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    server.close()
    assert not errors, errors[0]
    assert server.stats.requests == n_threads * calls
    assert server.stats.batches <= server.stats.requests


def test_gated_requests_run_as_one_batch() -> None:
    """Requests queued while the worker is busy are merged (up to max_batch rows) and split back."""
    net = small_net()
    sizes = [3, 1, 5, 2, 4, 1]
    # oldest first, then every later request that still fits: max_batch 6 packs 3+1+2 | 5+1 | 4
    for max_batch, want_batches in ((10_000, 1), (6, 3)):
        server = InferenceServer(net, cfg=ServerConfig(max_batch=max_batch, coalesce=True))
        gate = Gate()
        server.register("gate", gate)
        gate_future = wait_until_idle(server, gate)
        reqs = [inputs(b, 50 + i) for i, b in enumerate(sizes)]
        futures = [server.submit(QNET, step, *r) for r in reqs]
        seq = inputs(2, 99, t=3)
        seq_future = server.submit(QNET, forward, *seq)  # different signature: its own batch
        gate.release.set()
        gate_future.result(10)
        for r, f in zip(reqs, futures, strict=True):
            q, h = f.result(10)
            with torch.no_grad():
                q_ref, h_ref = net.step(*r)
            assert q.shape == (r[0].shape[0], A) and near(q, q_ref) and near(h.c, h_ref.c)
        with torch.no_grad():
            assert near(seq_future.result(10)[0], net(*seq)[0])
        server.close()
        st = server.stats
        assert st.requests == len(sizes) + 2 and st.batches == 1 + want_batches + 1, st
        assert st.rows == 1 + sum(sizes) + 2


# ---- weight updates ----------------------------------------------------------------------------------
def test_no_torn_weights_under_concurrent_updates() -> None:
    """Every result equals the output of exactly one whole weight version."""
    module = WeightSum()
    versions = 40
    server = InferenceServer(cfg=ServerConfig(max_batch=8, coalesce=True))
    server.register("sum", module)
    seen: list[float] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader(k: int) -> None:
        try:
            x = torch.ones(1 + k % 3, 2)
            while not done.is_set():
                if k == 0:
                    out = server.run_inline("sum", forward, x)
                else:
                    out = server.module("sum")(x)
                seen.extend(out.flatten().tolist())
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for v in range(1, versions + 1):
        state = {k: torch.full_like(p, float(v)) for k, p in module.state_dict().items()}
        assert server.update_weights(state, "sum") == v
    done.set()
    for t in threads:
        t.join(30)
    server.close()
    assert not errors, errors[0]
    assert server.version_of("sum") == versions and len(seen) > 0
    per_version = [s / module.numel for s in seen]
    assert all(p == int(p) and 0 <= p <= versions for p in per_version), sorted(set(per_version))[:10]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
def test_no_torn_weights_across_cuda_streams() -> None:
    """Readers on their own CUDA streams (as the trainer's actor thread with overlap) and updates on the
    default stream: every result is one whole version, and a read after an update sees it."""
    module = WeightSum(tensors=16, size=1 << 18)  # big copies: a load takes a while on the GPU
    versions = 30
    server = InferenceServer(device="cuda", cfg=ServerConfig(coalesce=False))
    server.register("sum", module)
    seen: list[torch.Tensor] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            with torch.cuda.stream(torch.cuda.Stream()):
                x = torch.ones(2, device="cuda")
                while not done.is_set():
                    seen.append(server.module("sum")(x))
                torch.cuda.current_stream().synchronize()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for v in range(1, versions + 1):
        state = {k: torch.full_like(p, float(v), device="cuda") for k, p in module.state_dict().items()}
        server.update_weights(state, "sum")
    done.set()
    for t in threads:
        t.join(60)
    with torch.cuda.stream(torch.cuda.Stream()):
        last = server.module("sum")(torch.ones(1, device="cuda"))
        torch.cuda.current_stream().synchronize()
    server.close()
    assert not errors, errors[0]
    per_version = [s / module.numel for out in seen for s in out.tolist()]
    assert all(p == int(p) and 0 <= p <= versions for p in per_version), sorted(set(per_version))[:10]
    assert last.item() == versions * module.numel


@pytest.mark.parametrize("coalesce", [False, True])
def test_two_weight_sets_never_mixed(coalesce: bool) -> None:
    """A Q-net served while its biases flip between all zeros and all ones returns one set's Q per call."""
    net = small_net()
    base = net.state_dict()
    sets = [{k: (torch.full_like(v, float(i)) if k.endswith("bias") else v) for k, v in base.items()}
            for i in (0, 1)]
    priv, publ, legal, hid = inputs(3, 5)
    refs = []
    for sd in sets:
        ref_net = small_net()
        ref_net.load_state_dict(sd)
        with torch.no_grad():
            refs.append(ref_net.step(priv, publ, legal, hid)[0])
    assert not near(refs[0], refs[1], 1e-2)
    server = InferenceServer(net, cfg=ServerConfig(coalesce=coalesce))
    server.update_weights(sets[0])
    results: list[torch.Tensor] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                results.append(server.qnet().step(priv, publ, legal, hid)[0])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(30):
        server.update_weights(sets[i % 2])
    done.set()
    for t in threads:
        t.join(30)
    server.close()
    assert not errors, errors[0]
    assert results
    for q in results:
        assert near(q, refs[0], 1e-4) != near(q, refs[1], 1e-4)


def test_bad_state_dict_keeps_serving() -> None:
    net = small_net()
    priv, publ, legal, hid = inputs(2, 3)
    with InferenceServer(net, cfg=MERGE) as server:
        before = server.qnet().step(priv, publ, legal, hid)[0]
        with pytest.raises(RuntimeError, match="state_dict"):
            server.update_weights({"nope": torch.zeros(1)})
        assert server.version == 0
        assert torch.equal(server.qnet().step(priv, publ, legal, hid)[0], before)
        assert server.update_weights(net.state_dict()) == 1  # and updates still work afterwards


# ---- the inline path and the merging worker ---------------------------------------------------------
class WhichThread(nn.Module):
    """Records the thread that runs its forward pass."""

    def __init__(self):
        super().__init__()
        self.threads: list[str] = []

    def __deepcopy__(self, memo: dict) -> WhichThread:
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.threads.append(threading.current_thread().name)
        return x


@pytest.mark.parametrize("coalesce", [False, True])
def test_calls_run_inline_unless_a_merging_worker_runs(coalesce: bool) -> None:
    """Without merging a call runs in its caller's thread (no hop through a worker with nothing to merge)."""
    probe = WhichThread()
    with InferenceServer(cfg=ServerConfig(coalesce=coalesce)) as server:
        server.register("probe", probe)
        server.module("probe")(torch.zeros(1, 1))
        if not coalesce:
            with pytest.raises(RuntimeError, match="coalesce=True"):
                server.submit("probe", forward, torch.zeros(1, 1))
    want = "lbs-inference" if coalesce else threading.current_thread().name
    assert probe.threads == [want]


def test_concurrent_handle_calls_merge_into_one_pass() -> None:
    """Three threads calling qnet.step while the worker is busy are served by one forward pass."""
    net = small_net()
    reqs = [inputs(b, 40 + b) for b in (1, 2, 3)]
    out: dict[int, tuple] = {}
    with InferenceServer(net, cfg=MERGE) as server:
        gate = Gate()
        server.register("gate", gate)
        gate_future = wait_until_idle(server, gate)
        qnet = server.qnet()
        threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, qnet.step(*reqs[i])))
                   for i in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while server._merger._queue.qsize() < 3 and time.monotonic() < deadline:  # queued behind the gate
            time.sleep(0.01)
        gate.release.set()
        gate_future.result(10)
        for t in threads:
            t.join(10)
        assert server.stats.batches == 2 and server.stats.requests == 4  # the gate, then the three together
    for i, r in enumerate(reqs):
        with torch.no_grad():
            assert near(out[i][0], net.step(*r)[0])


def test_smartbot_is_served_with_its_state_batched_on_dim_0() -> None:
    """SmartBot's state holds its rows on dim 0 (SmartBotState.batch_dim), not on dim 1 as an LSTM's: served
    inline, and merged with another caller's games into one pass, its steps equal the bot's own on the
    first lockstep steps of real games."""
    game = GameConfig(players=2)
    bot, n, p = SmartBot(game), 4, game.players
    calls: list[tuple] = []

    def own(*args):  # the bot's own steps, recorded with their inputs
        out = bot.step(*args)
        calls.append((args, out))
        return out

    with torch.no_grad():
        play(game, engine.reset(game, torch.arange(n)), own, bot.initial_state(n * p), 8)

    def same(a, b) -> bool:
        return type(a) is type(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))

    with InferenceServer(bot) as server:
        served = server.qnet()
        assert same(served.initial_state(n * p), bot.initial_state(n * p))
        for args, (scores, state) in calls:
            got_scores, got_state = served.step(*args)
            assert torch.equal(got_scores, scores) and same(got_state, state)

    # two callers with two games each (whole games: the bot decides per block of P rows), queued together
    first, rest = torch.arange(2 * p), torch.arange(2 * p, n * p)
    with InferenceServer(bot, cfg=MERGE) as server:
        gate = Gate()
        server.register("gate", gate)
        for (priv, publ, legal, hid), (scores, state) in calls:
            wait_until_idle(server, gate)
            futures = [server.submit(QNET, step, priv[rows], publ[rows], legal[rows], select_rows(hid, rows))
                       for rows in (first, rest)]
            gate.release.set()
            for rows, fut in zip((first, rest), futures, strict=True):
                got_scores, got_state = fut.result(10)
                assert torch.equal(got_scores, scores[rows]) and same(got_state, select_rows(state, rows))
        assert server.stats.batches == 2 * len(calls) and server.stats.requests == 3 * len(calls)


# ---- exploration on served Q-values ------------------------------------------------------------------
def explore(qnet, priv, publ, legal, hid, eps, keys=None, generator=None):
    """What the actors do with a served step: epsilon-greedy over its Q (lbs.acting.play)."""
    q, hid = qnet.step(priv, publ, legal, hid)
    return epsilon_greedy(q, legal, eps, keys=keys, generator=generator), q, hid


@pytest.mark.parametrize("use_keys", [True, False])
def test_explore_epsilon(use_keys: bool) -> None:
    order = [3, 1]
    net = FixedQNet(GAME, order)
    b = 400
    priv, publ, legal, _ = inputs(b, 7)
    legal[:] = False
    legal[:, [1, 2, 5, A - 1]] = True
    legal[: b // 2, 3] = True
    with InferenceServer(net) as server:
        qnet = server.qnet()
        hid = qnet.initial_state(b)

        def act(eps: float, step: int):
            keys = (torch.arange(b), torch.full((b,), step)) if use_keys else None
            gen = None if use_keys else torch.Generator().manual_seed(step)
            return explore(qnet, priv, publ, legal, hid, torch.full((b,), eps), keys=keys, generator=gen)

        actions, q, hid2 = act(0.0, 0)
        assert torch.equal(actions, greedy(q, legal)) and torch.equal(hid2.h, hid.h + 1)
        assert (actions[: b // 2] == 3).all() and (actions[b // 2:] == 1).all()  # first legal of `order`
        rand, _, _ = act(1.0, 1)
        assert legal.gather(1, rand[:, None]).all(), "exploration picked an illegal action"
        for rows in (slice(0, b // 2), slice(b // 2, b)):
            chosen = set(rand[rows].tolist())
            assert chosen == set(legal[rows][0].nonzero().flatten().tolist())  # covers every legal action
        half, _, _ = act(0.5, 2)
        explored = (half != actions).float().mean()
        assert 0.25 < explored < 0.6  # eps 0.5 explores half the time, sometimes landing on the greedy move


def test_explore_keys_independent_of_batching() -> None:
    """Only the forward pass is shared with other callers; the exploration draws use each caller's keys
    (hashed counters), so they do not depend on how the rows were merged."""
    net = small_net()
    b = 12
    priv, publ, legal, hid = inputs(b, 8)
    eps = torch.linspace(0, 1, b)
    keys = (torch.arange(b) + 77, torch.full((b,), 3))
    with InferenceServer(net, cfg=MERGE) as server:
        qnet = server.qnet()
        full, q, _ = explore(qnet, priv, publ, legal, hid, eps, keys=keys)
        parts = [explore(qnet, priv[s], publ[s], legal[s], HiddenState(hid.h[:, s], hid.c[:, s]), eps[s],
                         keys=tuple(k[s] for k in keys))[0] for s in (slice(0, 5), slice(5, b))]
    assert torch.equal(torch.cat(parts), full)
    with torch.no_grad():
        q_ref, _ = net.step(priv, publ, legal, hid)
    assert torch.equal(full, epsilon_greedy(q_ref, legal, eps, keys=keys))


def test_bf16_precision_close_to_fp32() -> None:
    net = small_net()
    priv, publ, legal, hid = inputs(4, 9)
    with InferenceServer(net, cfg=ServerConfig(precision="bf16")) as server:
        q, h = server.qnet().step(priv, publ, legal, hid)
    with torch.no_grad():
        q_ref, _ = net.step(priv, publ, legal, hid)
    assert q.dtype == torch.float32 and h.h.dtype == torch.float32
    assert torch.allclose(q, q_ref, atol=0.05, rtol=0.05) and not torch.equal(q, q_ref)


# ---- errors and lifecycle ---------------------------------------------------------------------------
def test_errors_reach_their_caller() -> None:
    net = small_net()
    priv, publ, legal, hid = inputs(2, 4)
    server = InferenceServer(net, cfg=MERGE)
    qnet = server.qnet()
    with pytest.raises(ValueError, match="publ must be"):
        qnet.step(priv, priv, legal, hid)  # raised in the worker, re-raised here
    with pytest.raises(ValueError, match="no model registered as 'belief'"):
        server.belief()
    with pytest.raises(ValueError, match="cannot back a BeliefHandle: it has no encode, sample"):
        server.belief(QNET)
    with pytest.raises(ValueError, match="disagree on the batch size"):
        qnet.step(priv, publ[:1], legal, hid)
    with pytest.raises(TypeError, match="keyword"):
        server.call(QNET, step, priv, publ, legal, hid, 3)
    with pytest.raises(ValueError, match="already registered"):
        server.register(QNET, net)
    # a value-dependent failure inside a merged batch fails only the request that caused it
    server.register("picky", Picky())
    gate = Gate()
    server.register("gate", gate)
    gate_future = wait_until_idle(server, gate)
    good = [server.submit("picky", forward, torch.full((2, 3), float(i))) for i in range(3)]
    bad = server.submit("picky", forward, -torch.ones(1, 3))
    more = server.submit("picky", forward, torch.ones(4, 3))
    gate.release.set()
    gate_future.result(10)
    with pytest.raises(ValueError, match="negative input"):
        bad.result(10)
    for i, f in enumerate(good):
        assert torch.equal(f.result(10), torch.full((2, 3), 2.0 * i))
    assert torch.equal(more.result(10), torch.full((4, 3), 2.0))
    assert torch.equal(qnet.step(priv, publ, legal, hid)[0], server.run_inline(QNET, step, priv, publ, legal,
                                                                               hid)[0])
    server.close()


def test_abandoned_calls_and_shutdown() -> None:
    """A caller that raises after submitting does not wedge the server; close serves what is queued."""
    net = small_net()
    priv, publ, legal, hid = inputs(2, 6)
    server = InferenceServer(net, cfg=MERGE)
    qnet = server.qnet()

    died = threading.Event()

    def careless() -> None:
        try:
            server.submit(QNET, step, priv, publ, legal, hid)
            raise RuntimeError("caller died before collecting its result")
        except RuntimeError:
            died.set()

    t = threading.Thread(target=careless)
    t.start()
    t.join(10)
    assert died.is_set()
    assert qnet.step(priv, publ, legal, hid)[0].shape == (2, A)
    queued = [server.submit(QNET, step, priv, publ, legal, hid) for _ in range(5)]
    cancelled = server.submit(QNET, step, priv, publ, legal, hid)
    cancelled.cancel()
    start = time.monotonic()
    server.close(timeout=20)
    assert time.monotonic() - start < 20 and server.closed
    assert all(f.done() and f.result()[0].shape == (2, A) for f in queued)
    with pytest.raises(RuntimeError, match="closed"):
        qnet.step(priv, publ, legal, hid)
    with pytest.raises(RuntimeError, match="closed"):
        server.submit(QNET, step, priv, publ, legal, hid)
    server.close()  # idempotent
    inline = InferenceServer(net)
    inline.close()
    with pytest.raises(RuntimeError, match="closed"):
        inline.qnet().step(priv, publ, legal, hid)


def test_server_config_validation() -> None:
    with pytest.raises(ValueError, match="ServerConfig.precision"):
        ServerConfig(precision="fp8")
    with pytest.raises(ValueError, match="ServerConfig.max_batch"):
        ServerConfig(max_batch=0)


def test_tf32_never_leaks_out_of_the_server():
    """A tf32 server sets torch's process-wide TF32 flags only inside its forward passes: creating one
    (and the context it uses) leaves fp32 meaning fp32 for everything else in the process."""
    from lbs.infer import tf32_matmuls

    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        InferenceServer(device="cuda", cfg=ServerConfig(precision="tf32", coalesce=False)).close()
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        with tf32_matmuls():
            assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = True  # torch's default: an fp32 server's passes turn it off
        with tf32_matmuls(False):
            assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        assert torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


# ---- every model call can be followed ------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]
SERVER_CALLS = {"call", "submit", "run_inline", "run_direct"}


def string_method_calls(source: str) -> list[int]:
    """Lines that name a model's method in a string: a server call whose second argument is a string
    (`server.call(name, "method", ...)`), or operator.methodcaller."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        method = node.args[1] if len(node.args) > 1 else None
        named = isinstance(method, ast.Constant) and isinstance(method.value, str)
        if (name in SERVER_CALLS and named) or name == "methodcaller":
            lines.append(node.lineno)
    return lines


def test_no_model_is_called_by_a_method_name_in_a_string() -> None:
    assert string_method_calls('server.call(BELIEF, "sample_served", c, s, h, k=4)') == [1]
    assert string_method_calls("x = methodcaller('step')(net)") == [1]
    assert string_method_calls("server.belief().sample(c, s, h, k=4)\nserver.call(QNET, step, x)") == []
    found = {}
    for folder in ("lbs", "train", "search", "experiments", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            lines = string_method_calls(path.read_text())
            if lines:
                found[str(path.relative_to(ROOT))] = lines
    assert not found, f"models called by a method name in a string (use a typed handle): {found}"
