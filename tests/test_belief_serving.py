"""The belief model behind the inference server: coalesced sampling equals direct sampling."""

import threading

import torch

from lbs.hanabi import GameConfig
from lbs.infer import InferenceServer, ServerConfig
from lbs.models import NetConfig, make_qnet
from lbs.models.belief import BeliefConfig, BeliefModel


def concurrently(work, n: int) -> None:
    """work(0) .. work(n - 1), each in its own thread, all started before any is joined."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_served_sampling_equals_direct_calls():
    game = GameConfig(players=2, colors=2, ranks=3, hand_size=3)
    torch.manual_seed(0)
    model = BeliefModel(game, BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=8)).eval()
    queries = []
    for i in range(6):
        q = 1 + i % 3
        priv = torch.randint(0, 2, (q, 4, game.private_dim)).float()
        with torch.no_grad():
            ctx, _ = model.encode(priv)
        queries.append((ctx[:, -1], 100 * i + torch.arange(q), torch.randint(1, game.hand_size + 1, (q,))))
    with torch.no_grad():
        direct = [model.sample(c, 50, s, h) for c, s, h in queries]
    server = InferenceServer(device="cpu", cfg=ServerConfig(coalesce=True))
    server.register("belief", model)
    out: dict[int, torch.Tensor] = {}

    def work(i: int) -> None:
        out[i] = server.belief().sample(*queries[i], k=50)

    with server:
        concurrently(work, len(queries))
    for i, d in enumerate(direct):
        assert torch.equal(out[i], d), i
        hand_len = queries[i][2]
        assert ((out[i] >= 0).sum(-1) == hand_len[:, None]).all()


def test_served_encoding_of_a_belief_reading_the_blueprint_equals_direct_calls():
    """Concurrent encode calls merged by the server: a belief with blueprint_features carries the
    blueprint's state beside its own (four tensors, rows on dim 1), and each caller gets its own rows."""
    game = GameConfig(players=2, colors=2, ranks=3, hand_size=3)
    torch.manual_seed(0)
    net = make_qnet(game, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1)).eval()
    cfg = BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=8, blueprint_features=True)
    model = BeliefModel(game, cfg, net).eval()
    inputs = [torch.randint(0, 2, (1 + i % 3, 2, game.private_dim)).float() for i in range(6)]
    with torch.no_grad():
        direct = [model.encode(p[:, 1:], model.encode(p[:, :1])[1]) for p in inputs]
    server = InferenceServer(device="cpu", cfg=ServerConfig(coalesce=True))
    server.register("belief", model)
    out: dict[int, tuple] = {}

    def work(i: int) -> None:
        _, hid = server.belief().encode(inputs[i][:, :1], None)
        out[i] = server.belief().encode(inputs[i][:, 1:], hid)

    with server:
        concurrently(work, len(inputs))
    for i, (ctx, hid) in enumerate(direct):
        assert len(out[i][1]) == 4 and torch.allclose(out[i][0], ctx, atol=1e-6), i
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(out[i][1], hid, strict=True)), i
