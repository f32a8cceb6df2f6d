"""BeliefModel: teacher-forced likelihood against a hand-run LSTM, exact sampling distribution
(chi-square against the enumerated model probabilities), the step-wise encoder API, shapes, devices
and input errors. Tiny models on tiny variants so every hand can be enumerated."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
import torch

from lbs.configs import from_dict, to_dict
from lbs.hanabi import GameConfig
from lbs.models.belief import BeliefConfig, BeliefModel, counting_log_prob

torch.set_num_threads(1)
GAME = GameConfig(players=2, colors=2, ranks=2, hand_size=3)  # 4 card ids, 64 full hands
TINY = BeliefConfig(hidden=16, mlp_layers=2, lstm_layers=2, decoder_layers=1, card_embed=8, count_prior=False)
PRIOR = replace(TINY, count_prior=True)
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")),
]


def make_model(seed: int = 0, cfg: BeliefConfig = TINY, game: GameConfig = GAME, sharpen: float = 3.0):
    """A random tiny model whose output distribution is far from uniform (so the tests have power)."""
    torch.manual_seed(seed)
    model = BeliefModel(game, cfg)
    with torch.no_grad():
        model.head.weight.mul_(sharpen)
        model.head.bias.normal_(0.0, 1.0)
    return model


def random_context(model: BeliefModel, q: int, seed: int) -> torch.Tensor:
    """[Q, E] contexts; with the counting prior, random unseen counts (1-3) and plausibility bits, so
    some slots allow few cards and some none (the prior's fallback)."""
    gen = torch.Generator().manual_seed(seed)
    net = torch.randn(q, model.cfg.hidden, generator=gen)
    if not model.cfg.count_prior:
        return net
    c = GAME.card_types
    unseen = torch.randint(1, 4, (q, c), generator=gen).float()
    plaus = (torch.rand(q, GAME.hand_size * c, generator=gen) < 0.85).float()
    return torch.cat([net, unseen, plaus], -1)


def random_hands(b: int, t: int, game: GameConfig, gen: torch.Generator) -> torch.Tensor:
    """[B, T, H] hands packed from slot 0 with random lengths (0 = a padded time step)."""
    cards = torch.randint(0, game.card_types, (b, t, game.hand_size), generator=gen)
    n = torch.randint(0, game.hand_size + 1, (b, t, 1), generator=gen)
    return torch.where(torch.arange(game.hand_size) < n, cards, -1)


def all_hands(game: GameConfig, length: int) -> torch.Tensor:
    """[N, H] every hand of `length` cards, -1 after."""
    pad = [-1] * (game.hand_size - length)
    return torch.tensor([list(h) + pad for h in itertools.product(range(game.card_types), repeat=length)])


def hand_index(hands: torch.Tensor, game: GameConfig) -> torch.Tensor:
    """Injective code of a hand (base card_types + 1, with -1 -> 0)."""
    base = game.card_types + 1
    w = base ** torch.arange(game.hand_size)
    return ((hands + 1) * w).sum(-1)


def chi2_pvalue(observed: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson chi-square p-value; bins expecting < 5 draws are pooled into one."""
    n = observed.sum()
    expected = probs.double() * n
    big = expected >= 5
    obs = torch.cat([observed[big].double(), observed[~big].sum()[None].double()])
    exp = torch.cat([expected[big], expected[~big].sum()[None]])
    keep = exp > 0
    assert obs[~keep].sum() == 0, "samples fell on zero-probability hands"
    obs, exp = obs[keep], exp[keep]
    stat = ((obs - exp) ** 2 / exp).sum()
    df = obs.numel() - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2.0, dtype=torch.float64), stat / 2))


# ---- teacher forcing ---------------------------------------------------------------------------------
def lstm_by_hand(x: torch.Tensor, lstm: torch.nn.LSTM, hid=None) -> tuple[torch.Tensor, list, list]:
    """Run a batch-first nn.LSTM with explicit gate equations, one time step and layer at a time."""
    b, t, _ = x.shape
    hs = [torch.zeros(b, lstm.hidden_size, dtype=x.dtype) for _ in range(lstm.num_layers)]
    cs = [torch.zeros(b, lstm.hidden_size, dtype=x.dtype) for _ in range(lstm.num_layers)]
    if hid is not None:
        hs, cs = [h.clone() for h in hid[0]], [c.clone() for c in hid[1]]
    outs = []
    for step in range(t):
        inp = x[:, step]
        for layer in range(lstm.num_layers):
            w_ih, w_hh = getattr(lstm, f"weight_ih_l{layer}"), getattr(lstm, f"weight_hh_l{layer}")
            bias = getattr(lstm, f"bias_ih_l{layer}") + getattr(lstm, f"bias_hh_l{layer}")
            gates = inp @ w_ih.T + hs[layer] @ w_hh.T + bias
            i, f, g, o = gates.chunk(4, dim=-1)
            cs[layer] = torch.sigmoid(f) * cs[layer] + torch.sigmoid(i) * torch.tanh(g)
            hs[layer] = torch.sigmoid(o) * torch.tanh(cs[layer])
            inp = hs[layer]
        outs.append(inp)
    return torch.stack(outs, 1), hs, cs


def test_teacher_forced_log_prob_equals_hand_run_decoder():
    model = make_model(1).double()
    gen = torch.Generator().manual_seed(0)
    b, t = 3, 4
    priv = torch.rand(b, t, GAME.private_dim, generator=gen, dtype=torch.float64)
    hands = random_hands(b, t, GAME, gen)
    out = model.log_prob(priv, hands)
    with torch.no_grad():
        # encoder: explicit MLP, then the LSTM gate equations
        x = priv
        for lin in [m for m in model.mlp if isinstance(m, torch.nn.Linear)]:
            x = torch.relu(x @ lin.weight.T + lin.bias)
        context, _, _ = lstm_by_hand(x, model.encoder)
        # decoder: for every (game, time) run the slots oldest to newest, feeding the previous true card
        expected = torch.zeros(b, t, GAME.hand_size, dtype=torch.float64)
        for bi in range(b):
            for ti in range(t):
                hid = None
                prev = model.start_token
                for s in range(GAME.hand_size):
                    card = int(hands[bi, ti, s])
                    if card < 0:
                        break
                    inp = torch.cat([context[bi, ti], model.card_embedding.weight[prev]])[None, None]
                    o, hs, cs = lstm_by_hand(inp, model.decoder, hid)
                    hid = ([h for h in hs], [c for c in cs])
                    logits = o[0, 0] @ model.head.weight.T + model.head.bias
                    expected[bi, ti, s] = logits[card] - torch.logsumexp(logits, 0)
                    prev = card
    torch.testing.assert_close(out.slot_log_prob, expected, rtol=0, atol=1e-10)
    held = hands >= 0
    assert int(out.num_cards) == int(held.sum())
    torch.testing.assert_close(out.nll_per_card, -expected.sum() / held.sum(), rtol=0, atol=1e-10)
    assert (out.slot_log_prob[~held] == 0).all()


@pytest.mark.parametrize("cfg", [TINY, PRIOR], ids=["plain", "count_prior"])
def test_hand_probabilities_sum_to_one_for_every_length(cfg):
    model = make_model(2, cfg)
    context = random_context(model, 2, 2)
    with torch.no_grad():
        for length in range(GAME.hand_size + 1):
            hands = all_hands(GAME, length)
            for q in range(context.shape[0]):
                logp = model.hand_log_prob(context[q].expand(len(hands), -1), hands).sum(-1)
                assert float(logp.double().exp().sum()) == pytest.approx(1.0, abs=1e-5)


def test_nll_is_a_trainable_loss():
    model = make_model(3, sharpen=1.0)
    gen = torch.Generator().manual_seed(1)
    priv = (torch.rand(6, 5, GAME.private_dim, generator=gen) < 0.3).float()
    hands = random_hands(6, 5, GAME, gen)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(60):
        loss = model.log_prob(priv, hands).nll_per_card
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(model.log_prob(priv, hands).nll_per_card.detach()) < 0.7 * first


def test_padded_steps_count_for_nothing():
    model = make_model(4)
    gen = torch.Generator().manual_seed(2)
    priv = torch.rand(2, 3, GAME.private_dim, generator=gen)
    hands = random_hands(2, 3, GAME, gen)
    hands[:, 0] = torch.tensor([0, 1, 2])
    padded = hands.clone()
    padded[:, 2] = -1  # the last step becomes padding
    a, b = model.log_prob(priv, hands), model.log_prob(priv, padded)
    torch.testing.assert_close(a.slot_log_prob[:, :2], b.slot_log_prob[:, :2])
    assert (b.slot_log_prob[:, 2] == 0).all()
    assert int(b.num_cards) == int((padded >= 0).sum())


def test_count_prior_alone_is_the_counting_distribution():
    """With the network's output zeroed, p(hand) = prod_s w_s(card_s) / sum_c w_s(c), where
    w_s(c) = plausible_s(c) x (unseen(c) - copies of c in slots < s), computed here by hand."""
    model = make_model(13, PRIOR)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
    q = 4
    context = random_context(model, q, 3)
    unseen = context[:, TINY.hidden : TINY.hidden + GAME.card_types]
    plaus = context[:, TINY.hidden + GAME.card_types :].reshape(q, GAME.hand_size, GAME.card_types)
    hands = all_hands(GAME, GAME.hand_size)
    with torch.no_grad():
        for qi in range(q):
            got = model.hand_log_prob(context[qi].expand(len(hands), -1), hands).sum(-1).double().exp()
            for hand, p in zip(hands.tolist(), got.tolist(), strict=True):
                want, used = 1.0, [0] * GAME.card_types
                for s, card in enumerate(hand):
                    w = [float(plaus[qi, s, c]) * max(float(unseen[qi, c]) - used[c], 0.0)
                         for c in range(GAME.card_types)]
                    if sum(w) == 0:  # nothing possible: the prior steps aside (uniform here)
                        w = [1.0] * GAME.card_types
                    want *= w[card] / sum(w)
                    used[card] += 1
                assert p == pytest.approx(want, abs=1e-6)
            # the network-free baseline the evaluation reports is the same distribution
            base = counting_log_prob(unseen[qi].expand(len(hands), -1), plaus[qi].expand(len(hands), -1, -1),
                                     hands).sum(-1).exp()
            torch.testing.assert_close(base, got.double(), rtol=0, atol=1e-6)


def test_count_prior_reads_the_observation():
    """encode() appends the unseen copies and own-slot plausibility of the observation to the context."""
    from lbs.hanabi import engine
    from lbs.hanabi.encode import encode, own_hand_facts

    model = make_model(14, PRIOR)
    state = engine.reset(GAME, torch.arange(3))
    obs = encode(GAME, state)[:, 0]  # [3, D] player 0's view
    ctx, _ = model.encode(obs[:, None])
    unseen, plaus = own_hand_facts(GAME, obs)
    assert ctx.shape == (3, 1, model.context_dim)
    assert model.context_dim == TINY.hidden + GAME.card_types * (GAME.hand_size + 1)
    torch.testing.assert_close(ctx[:, 0, TINY.hidden : TINY.hidden + GAME.card_types], unseen.float())
    torch.testing.assert_close(ctx[:, 0, TINY.hidden + GAME.card_types :], plaus.flatten(-2).float())


def test_checkpoint_configs_from_before_the_prior_load_without_it():
    d = to_dict(TINY)
    del d["count_prior"]
    assert from_dict(BeliefConfig, d).count_prior is False
    with pytest.raises(ValueError, match="count_prior"):
        BeliefConfig(count_prior=1)


# ---- step-wise encoder ------------------------------------------------------------------------------
def test_encoder_steps_equal_the_full_sequence():
    model = make_model(5)
    priv = torch.rand(3, 6, GAME.private_dim)
    with torch.no_grad():
        full, hid_full = model.encode(priv)
        hid = model.initial_state(3)
        steps = []
        for t in range(6):
            ctx, hid = model.encode(priv[:, t : t + 1], hid)
            steps.append(ctx)
        torch.testing.assert_close(torch.cat(steps, 1), full)
        torch.testing.assert_close(hid.h, hid_full.h)
        torch.testing.assert_close(hid.c, hid_full.c)
        hands = random_hands(3, 6, GAME, torch.Generator().manual_seed(3))
        whole = model.log_prob(priv, hands)
        head = model.log_prob(priv[:, :2], hands[:, :2])
        tail = model.log_prob(priv[:, 2:], hands[:, 2:], head.hid)
        torch.testing.assert_close(
            torch.cat([head.slot_log_prob, tail.slot_log_prob], 1), whole.slot_log_prob
        )


# ---- sampling ---------------------------------------------------------------------------------------
def exact_probs(model: BeliefModel, context: torch.Tensor, length: int, mask_fn=None):
    """(hands [N, H], probabilities [N]) of every hand of `length`, as the product of the model's
    conditionals (renormalised over the allowed cards when a mask is given)."""
    hands = all_hands(GAME, length)
    n = len(hands)
    with torch.no_grad():
        logits = model.decode_logits(context.expand(n, -1), hands).double()  # [N, H, C]
    total = torch.zeros(n, dtype=torch.float64)
    for s in range(length):
        lg = logits[:, s]
        if mask_fn is not None:
            so_far = torch.where(torch.arange(GAME.hand_size) < s, hands, -1)[None]  # [1, N, H]
            lg = lg.masked_fill(~mask_fn(s, so_far)[0].expand(n, -1), float("-inf"))
        total = total + torch.log_softmax(lg, -1).gather(1, hands[:, s : s + 1]).squeeze(1)
    return hands, total.exp()


def check_frequencies(model, context, samples, lengths, mask_fn=None):
    for q, length in enumerate(lengths):
        hands, probs = exact_probs(model, context[q], length, mask_fn)
        assert float(probs.sum()) == pytest.approx(1.0, abs=1e-9)
        # power: a far-from-uniform distribution, or hands the model rules out (which must never be drawn)
        assert probs.max() > 3 * probs[probs > 0].min() or (probs == 0).any(), "model too close to uniform"
        got = samples[q]
        assert (got[:, length:] == -1).all() and (got[:, :length] >= 0).all()
        codes = hand_index(hands, GAME)
        drawn = hand_index(got, GAME)
        assert torch.isin(drawn, codes).all()
        counts = (drawn[:, None] == codes[None, :]).sum(0)
        assert chi2_pvalue(counts, probs) > 1e-3


@pytest.mark.parametrize("cfg", [TINY, PRIOR], ids=["plain", "count_prior"])
def test_seeded_sampling_matches_model_distribution(cfg):
    model = make_model(6, cfg)
    context = random_context(model, 3, 0)
    lengths = [3, 2, 3]
    samples = model.sample(context, 20000, torch.tensor([11, 12, 13]), torch.tensor(lengths))
    assert samples.shape == (3, 20000, GAME.hand_size) and samples.dtype == torch.long
    check_frequencies(model, context, samples, lengths)


@pytest.mark.parametrize("cfg", [TINY, PRIOR], ids=["plain", "count_prior"])
def test_generator_sampling_matches_model_distribution(cfg):
    model = make_model(7, cfg)
    context = random_context(model, 1, 1)
    samples = model.sample(context, 20000, torch.Generator().manual_seed(5))
    check_frequencies(model, context, samples, [GAME.hand_size])


def test_masked_sampling_matches_renormalised_conditionals():
    """A dynamic mask (no card twice, and never card 0 in slot 1) samples from the product of the
    conditionals renormalised over the allowed cards."""
    model = make_model(8)
    context = torch.randn(2, model.context_dim)

    def no_repeats(slot: int, hands: torch.Tensor) -> torch.Tensor:
        seen = torch.zeros(*hands.shape[:2], GAME.card_types, dtype=torch.long)
        seen = seen.scatter_add_(2, hands.clamp(min=0), (hands >= 0).long())
        allowed = seen == 0
        if slot == 1:
            allowed[..., 0] = False
        return allowed

    samples = model.sample(context, 20000, torch.tensor([3, 4]), mask_fn=no_repeats)
    check_frequencies(model, context, samples, [GAME.hand_size] * 2, no_repeats)
    assert (samples[:, :, 1] != 0).all()
    assert (samples[..., 0] != samples[..., 1]).all() and (samples[..., 1] != samples[..., 2]).all()


def test_mask_with_nothing_allowed_falls_back_without_nan():
    model = make_model(9)
    context = torch.randn(2, model.context_dim)
    out = model.sample(
        context, 50, torch.tensor([1, 2]), mask_fn=lambda s, h: torch.zeros(1, 1, GAME.card_types)
    )
    assert ((out >= 0) & (out < GAME.card_types)).all()


def test_seeded_sampling_is_deterministic_per_query():
    model = make_model(10)
    context = torch.randn(3, model.context_dim)
    a = model.sample(context, 64, torch.tensor([1, 2, 3]))
    b = model.sample(context, 64, torch.tensor([1, 2, 3]))
    assert torch.equal(a, b)
    # a query's samples depend on its own seed and context only, not on the other rows
    c = model.sample(context[1:2], 64, torch.tensor([2]))
    assert torch.equal(a[1:2], c)
    assert not torch.equal(a[0], model.sample(context[0:1], 64, torch.tensor([99]))[0])


@pytest.mark.parametrize("device", DEVICES)
def test_shapes_and_devices(device):
    model = make_model(11).to(device)
    priv = torch.rand(2, 5, GAME.private_dim, device=device)
    hands = random_hands(2, 5, GAME, torch.Generator().manual_seed(4)).to(device)
    out = model.log_prob(priv, hands)
    assert out.slot_log_prob.shape == (2, 5, GAME.hand_size) and out.slot_log_prob.device.type == device
    assert out.nll_per_card.shape == () and out.hid.h.shape == (TINY.lstm_layers, 2, TINY.hidden)
    ctx, hid = model.encode(priv[:, :1], model.initial_state(2, device))
    assert ctx.shape == (2, 1, model.context_dim) and ctx.device.type == device
    hl = torch.tensor([3, 1], device=device)
    s = model.sample(ctx[:, 0], 7, torch.tensor([5, 6], device=device), hl)
    assert s.shape == (2, 7, GAME.hand_size) and s.device.type == device
    assert (s[1, :, 1:] == -1).all() and (s[0] >= 0).all()
    if device != "cpu":  # the same seeds give the same hands on every device (up to float rounding)
        cpu = model.cpu().sample(ctx[:, 0].cpu(), 7, torch.tensor([5, 6]), hl.cpu())
        assert (cpu == s.cpu()).float().mean() > 0.95


def test_full_size_default_config_builds():
    game = GameConfig(players=2)
    model = BeliefModel(game)
    assert model.cfg == BeliefConfig() and model.head.out_features == game.card_types
    assert model.cfg.count_prior
    assert from_dict(BeliefConfig, to_dict(model.cfg)) == model.cfg
    with torch.no_grad():
        ctx, _ = model.encode(torch.zeros(1, 2, game.private_dim))
        assert model.sample(ctx[:, -1], 3, torch.tensor([0])).shape == (1, 3, game.hand_size)


# ---- errors -----------------------------------------------------------------------------------------
def test_bad_inputs_raise_clear_errors():
    model = make_model(12)
    d, h, e = GAME.private_dim, GAME.hand_size, model.context_dim
    good_priv, good_hands = torch.zeros(2, 3, d), torch.zeros(2, 3, h, dtype=torch.long)
    with pytest.raises(ValueError, match="private_dim"):
        model.encode(torch.zeros(2, 3, d + 1))
    with pytest.raises(ValueError, match="private_dim"):
        model.encode(torch.zeros(2, d))
    with pytest.raises(ValueError, match="hid"):
        model.encode(good_priv, model.initial_state(5))
    with pytest.raises(ValueError, match="hands must be"):
        model.log_prob(good_priv, torch.zeros(2, 3, h + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="hands must be"):
        model.log_prob(good_priv, torch.zeros(2, 4, h, dtype=torch.long))
    with pytest.raises(ValueError, match="integer"):
        model.log_prob(good_priv, good_hands.float())
    with pytest.raises(ValueError, match="context must be"):
        model.sample(torch.zeros(2, 3, e), 4, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="context must be"):
        model.sample(torch.zeros(2, e + 1), 4, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="hand_len"):
        model.sample(torch.zeros(2, e), 4, torch.tensor([0, 1]), torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="seeds"):
        model.sample(torch.zeros(2, e), 4, torch.tensor([0]))
    with pytest.raises(ValueError, match="k must be"):
        model.sample(torch.zeros(2, e), 0, torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="rng"):
        model.sample(torch.zeros(2, e), 4, 7)
    with pytest.raises(ValueError, match="share leading dims"):
        model.decode_logits(torch.zeros(3, e), torch.zeros(2, h, dtype=torch.long))
    with pytest.raises(ValueError, match="BeliefConfig.hidden"):
        BeliefConfig(hidden=0)
    with pytest.raises(ValueError, match="BeliefConfig.card_embed"):
        BeliefConfig(card_embed=2.5)
