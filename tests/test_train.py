"""Tests for the learner (``alphazero.learn.train``): loss, learning, schedule, and resumable state."""

from __future__ import annotations

import dataclasses
import math

import chess
import numpy as np
import pytest
import torch

from alphazero.board import encoding
from alphazero.board.game import MAX_LENGTH
from alphazero.config import TrainConfig
from alphazero.learn.replay import write_shard
from alphazero.learn.train import (
    Learner,
    anneal_factor,
    compute_loss,
    draw_targets,
    moves_left_loss,
    value_targets,
    wdl_target,
)
from alphazero.nets.network import (
    NetworkConfig,
    PolicyValueNet,
    atomic_torch_save,
    fuse_for_inference,
    load_network,
    net_from_payload,
    net_to_payload,
    safe_torch_load,
    save_network,
)
from alphazero.search.records import GameRecord

torch.set_num_threads(1)

# Without the material head: these tests check the value and policy terms alone (the material head has its own).
TINY = NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16, material_head=False, material_utility=0.0)


def _boards(count: int, seed: int) -> list[chess.Board]:
    rng = np.random.default_rng(seed)
    board, boards = chess.Board(), []
    while len(boards) < count:
        moves = list(board.legal_moves)
        if not moves:
            board = chess.Board()
            continue
        boards.append(board.copy())
        board.push(moves[int(rng.integers(len(moves)))])
    return boards


def _record(count: int, seed: int, termination: str = "checkmate") -> GameRecord:
    """``count`` real positions; each targets two legal moves (visits 6:2) and z cycling +1, -1, 0."""
    rng = np.random.default_rng(seed)
    boards = _boards(count, seed)
    actions, counts = [], []
    for board in boards:
        moves = list(board.legal_moves)
        pick = rng.choice(len(moves), 2, replace=False)
        actions.append(encoding.moves_to_actions(board, [moves[i] for i in pick]).astype(np.uint16))
        counts.append(np.array([6, 2], dtype=np.uint16))
    z = np.array([(1, -1, 0)[i % 3] for i in range(count)], dtype=np.int8)
    if termination == MAX_LENGTH:
        z[:] = 0
    return GameRecord(
        planes=encoding.encode_packed(boards), policy_offsets=np.arange(0, 2 * count + 1, 2),
        policy_actions=np.concatenate(actions), policy_counts=np.concatenate(counts), z=z,
        root_values=rng.uniform(-1, 1, count).astype(np.float16), result="1-0", termination=termination,
        network_version=0, pgn="*", plies=count,
    )


def _shard(tmp_path, count: int = 6, seed: int = 0, termination: str = "checkmate") -> str:
    path = tmp_path / f"shard-{seed:08d}.npz"
    write_shard(path, [_record(count, seed, termination)])
    return str(path)


def _config(**changes) -> TrainConfig:
    # The value target is the game result (q_weight 0), and games stopped at the length limit count too.
    # fp32 whatever the CPU (auto would take bf16 where it computes it natively): the tests' figures are fp32's.
    base = TrainConfig(batch_size=16, learning_rate=0.05, window_positions=1000, min_positions=1, device="cpu",
                       q_weight=0.0, value_from_unfinished=True, precision="fp32", channels_last=False)
    return dataclasses.replace(base, **changes)


# -- loss -------------------------------------------------------------------------------------------------


def _batch(size: int = 5, seed: int = 1):
    rng = np.random.default_rng(seed)
    planes = torch.from_numpy(encoding.encode_boards(_boards(size, seed)))
    pi = np.zeros((size, encoding.NUM_ACTIONS), dtype=np.float32)
    for row in range(size):
        support = rng.choice(encoding.NUM_ACTIONS, 4, replace=False)
        pi[row, support] = rng.dirichlet(np.ones(4))
    z = torch.from_numpy(rng.choice([-1.0, 0.0, 1.0], size).astype(np.float32))
    return planes, torch.from_numpy(pi), z


def _by_hand(net, planes, pi, z, weight=None):
    with torch.no_grad():
        logits, value = net(planes)
    logits = logits.double().numpy()
    value, z, pi = value.double().numpy(), z.double().numpy(), pi.double().numpy()
    squared = (value - z) ** 2
    value_loss = squared.mean() if weight is None else (weight * squared).sum() / max(weight.sum(), 1.0)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    policy_loss = -(pi * log_softmax).sum(axis=1).mean()
    return value_loss, policy_loss


def test_compute_loss_is_squared_error_plus_cross_entropy():
    torch.manual_seed(0)
    net = PolicyValueNet(TINY).eval()
    planes, pi, z = _batch()
    total, value_loss, policy_loss, material_loss, _, _ = compute_loss(net, planes, pi, z)
    expected_value, expected_policy = _by_hand(net, planes, pi, z)
    assert value_loss.item() == pytest.approx(expected_value, rel=1e-5, abs=1e-6)
    assert policy_loss.item() == pytest.approx(expected_policy, rel=1e-5)
    assert total.item() == pytest.approx(expected_value + expected_policy, rel=1e-5)
    assert expected_value > 0.05  # an untrained net: the check is not 0 == 0
    assert material_loss.item() == 0.0  # no material head


def test_value_weight_drops_positions_from_the_value_term():
    torch.manual_seed(0)
    net = PolicyValueNet(TINY).eval()
    planes, pi, z = _batch(6)
    weight = np.array([1, 0, 1, 1, 0, 0], dtype=np.float64)
    _, value_loss, policy_loss, _, _, _ = compute_loss(net, planes, pi, z, torch.tensor(weight, dtype=torch.float32))
    expected_value, expected_policy = _by_hand(net, planes, pi, z, weight)
    assert value_loss.item() == pytest.approx(expected_value, rel=1e-5, abs=1e-6)
    assert policy_loss.item() == pytest.approx(expected_policy, rel=1e-5)  # the policy keeps every position
    _, none_kept, _, _, _, _ = compute_loss(net, planes, pi, z, torch.zeros(6))
    assert none_kept.item() == 0.0


def test_the_soft_policy_target_is_pi_to_the_power_one_over_t_renormalised():
    from alphazero.learn.train import soft_policy_target

    pi = torch.tensor([[0.6, 0.36, 0.03, 0.01, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    soft = soft_policy_target(pi, 4.0)
    roots = np.array([0.6, 0.36, 0.03, 0.01]) ** 0.25  # KataGo's example: 60/36/3/1 -> about 37/32/17/13
    assert soft[0, :4].numpy() == pytest.approx(roots / roots.sum(), rel=1e-5)
    assert soft[0, 4].item() == 0.0 and soft[1].sum().item() == 0.0  # unvisited moves and empty rows stay 0
    assert soft_policy_target(pi, 1.0)[0].numpy() == pytest.approx(pi[0].numpy())


def test_the_wdl_target_has_the_value_target_as_its_expected_result_and_the_draws_asked_for():
    z = torch.tensor([1.0, -1.0, 0.0, 0.5, 0.25])
    draw = torch.tensor([0.0, 0.0, 0.5, 0.0, 0.5])
    target = wdl_target(z, draw)
    assert torch.allclose(target.sum(dim=1), torch.ones(5)) and (target >= 0).all()
    assert torch.allclose(target[:, 0] - target[:, 2], z) and torch.equal(target[:, 1], draw)
    assert torch.equal(wdl_target(torch.tensor([1.0, -1.0])), torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]))
    # Self-play: a drawn finished game keeps (1 - q_weight) on the draw, q's share splits into win and loss;
    # a game stopped at the length limit (z 0, result unknown) has no draw.
    z_np, known = np.array([1.0, 0.0, 0.0, -1.0], dtype=np.float32), np.array([True, True, False, True])
    q = np.array([0.5, -0.2, 0.3, -0.6], dtype=np.float32)
    config = _config(q_weight=0.5, value_from_unfinished=True)
    np.testing.assert_allclose(draw_targets(z_np, known, config), [0.0, 0.5, 0.0, 0.0])
    value, _ = value_targets(z_np, q, known, config)
    blended = wdl_target(torch.from_numpy(value), torch.from_numpy(draw_targets(z_np, known, config)))
    np.testing.assert_allclose(blended[1].numpy(), [0.5 * 0.4, 0.5, 0.5 * 0.6], atol=1e-6)  # 0.5 draw + 0.5 q=-0.2
    assert (blended >= 0).all()


def test_the_wdl_head_is_trained_by_cross_entropy_and_searched_as_its_expected_result():
    torch.manual_seed(0)
    net = PolicyValueNet(dataclasses.replace(TINY, wdl_head=True, material_head=False)).eval()
    with torch.no_grad():  # spread the logits, so the three outcomes differ
        net.value_head[-2].weight.normal_(0, 1.0)
    planes, pi, z = _batch()
    draw = 0.5 * (z == 0).float()  # a drawn game's target, half of it q's split
    assert draw.sum() > 0
    heads = net.forward_training(planes)
    assert heads.wdl is not None and heads.wdl.shape == (len(z), 3)
    probabilities = torch.softmax(heads.wdl, dim=1)
    assert torch.allclose(heads.value, probabilities[:, 0] - probabilities[:, 2], atol=1e-6)
    _, value = net(planes)
    assert torch.allclose(value, heads.value) and value.abs().max() <= 1.0
    total, value_loss, policy_loss, _, _, _ = compute_loss(net, planes, pi, z, draw=draw)
    expected = -(wdl_target(z, draw) * torch.log_softmax(heads.wdl, dim=1)).sum(dim=1).mean()
    assert value_loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert total.item() == pytest.approx(value_loss.item() + policy_loss.item(), rel=1e-5)
    weight = torch.zeros(len(z))
    weight[0] = 1.0
    only_first = compute_loss(net, planes, pi, z, weight, draw=draw).value
    first = -(wdl_target(z, draw)[0] * torch.log_softmax(heads.wdl, dim=1)[0]).sum()
    assert only_first.item() == pytest.approx(first.item(), rel=1e-5)
    fused_logits, fused_value = fuse_for_inference(net)(planes)  # what the searches run
    assert torch.allclose(fused_value, value, atol=1e-5)


def test_the_soft_policy_head_adds_its_weighted_cross_entropy_and_nothing_else():
    torch.manual_seed(0)
    net = PolicyValueNet(dataclasses.replace(TINY, soft_policy_head=True)).eval()
    planes, pi, z = _batch()
    total, value_loss, policy_loss, _, soft, _ = compute_loss(net, planes, pi, z, soft_policy_weight=8.0,
                                                           soft_policy_temperature=4.0)
    soft_logits = net.forward_training(planes).soft_policy
    assert soft_logits is not None
    from alphazero.learn.train import soft_policy_target

    expected = -(soft_policy_target(pi, 4.0) * torch.log_softmax(soft_logits, dim=1)).sum(dim=1).mean()
    assert soft.item() == pytest.approx(expected.item(), rel=1e-5) and soft.item() > 1.0
    assert total.item() == pytest.approx(value_loss.item() + policy_loss.item() + 8.0 * soft.item(), rel=1e-5)
    unweighted = compute_loss(net, planes, pi, z)  # weight 0: the head is not even run
    assert unweighted.soft_policy.item() == 0.0 and unweighted.total.item() == pytest.approx(
        value_loss.item() + policy_loss.item(), rel=1e-5)
    logits, value = net(planes)  # what the searches read does not change with the head
    plain = PolicyValueNet(TINY).eval()
    plain.load_state_dict({k: v for k, v in net.state_dict().items() if not k.startswith("soft_policy_out")})
    plain_logits, plain_value = plain(planes)
    assert torch.equal(logits, plain_logits) and torch.equal(value, plain_value)


def test_a_learner_with_the_soft_head_learns_it_and_saves_it(tmp_path):
    config = _config(soft_policy_weight=8.0)
    learner = Learner(dataclasses.replace(TINY, soft_policy_head=True), config, seed=0)
    learner.add_shards([_shard(tmp_path)])
    stats = [learner.train(1) for _ in range(25)]
    assert stats[0].soft_policy_loss > 0 and np.mean([s.soft_policy_loss for s in stats[-5:]]) < 0.8 * stats[0].soft_policy_loss
    path = tmp_path / "net.pt"
    save_network(learner.candidate_network(), path)
    loaded = load_network(path)
    assert loaded.config.soft_policy_head and loaded.soft_policy_out is not None
    # A network saved before the key existed loads without the head.
    payload = net_to_payload(PolicyValueNet(TINY))
    del payload["config"]["soft_policy_head"]
    assert net_from_payload(payload).soft_policy_out is None


# -- learning ---------------------------------------------------------------------------------------------


def test_loss_decreases_on_a_fixed_tiny_dataset(tmp_path):
    learner = Learner(TINY, _config(), seed=0)
    assert learner.add_shards([_shard(tmp_path)]) == 6
    stats = [learner.train(1) for _ in range(30)]
    first, last = stats[0], stats[-5:]
    assert np.mean([s.loss for s in last]) < 0.4 * first.loss
    assert np.mean([s.value_loss for s in last]) < 0.5 * first.value_loss
    assert np.mean([s.policy_loss for s in last]) < 0.4 * first.policy_loss
    assert learner.step == 30 and learner.samples_trained == 30 * 16
    # What was learned is visible in the outputs: most policy mass on the searched moves (uniform would
    # give them 2 / 4672) and the value sign of every decisive position.
    record = _record(6, 0)
    net = learner.get_network().train()  # batch statistics, as in training
    with torch.no_grad():
        logits, value = net(torch.from_numpy(encoding.unpack_planes(record.planes)))
    probs = torch.softmax(logits, dim=1)
    mass = [probs[t, record.policy_actions[2 * t: 2 * t + 2].astype(int)].sum().item() for t in range(6)]
    assert np.mean(mass) > 0.25 and min(mass) > 0.05, mass
    for t in range(6):
        if record.z[t] != 0:
            assert np.sign(value[t].item()) == record.z[t], (t, value[t].item())


def test_training_needs_data():
    learner = Learner(TINY, _config(), seed=0)
    with pytest.raises(ValueError):
        learner.train(1)


def test_add_shards_skips_shards_already_loaded(tmp_path):
    learner = Learner(TINY, _config(), seed=0)
    first = _shard(tmp_path, 6, seed=0)
    assert learner.add_shards([first]) == 6
    assert learner.add_shards([first, _shard(tmp_path, 4, seed=1)]) == 10


def test_unfinished_games_can_be_kept_out_of_the_value_loss(tmp_path):
    path = _shard(tmp_path, 6, termination=MAX_LENGTH)
    kept = Learner(TINY, _config(value_from_unfinished=False), seed=0)
    kept.add_shards([path])
    assert kept.train(2).value_loss == 0.0
    counted = Learner(TINY, _config(value_from_unfinished=True), seed=0)
    counted.add_shards([path])
    assert counted.train(2).value_loss > 0.0


def test_learning_rate_drops_at_milestones(tmp_path):
    base, gamma, milestones = 0.1, 0.5, (2, 5)
    learner = Learner(TINY, _config(learning_rate=base, lr_gamma=gamma, lr_milestones=milestones), seed=0)
    learner.add_shards([_shard(tmp_path)])
    used = []
    for _ in range(7):
        learner.train(1)
        used.append(learner.optimizer.param_groups[0]["lr"])  # the rate the step just taken used
    expected = [base * gamma ** sum(step >= m for m in milestones) for step in range(7)]
    assert used == pytest.approx(expected)
    assert used[0] == pytest.approx(0.1) and used[-1] == pytest.approx(0.025)
    assert learner.learning_rate() == pytest.approx(0.025)


def test_the_learning_rate_anneals_along_a_half_cosine_over_the_last_share_of_the_run(tmp_path):
    config = _config(learning_rate=0.1, lr_anneal_fraction=0.4, lr_anneal_floor=0.1)
    assert [anneal_factor(config, p) for p in (None, 0.0, 0.6)] == [1.0, 1.0, 1.0]  # before the last 40%
    assert anneal_factor(config, 0.8) == pytest.approx(0.1 + 0.9 * 0.5)  # half way down: cos(pi / 2) = 0
    assert anneal_factor(config, 0.7) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert anneal_factor(config, 1.0) == pytest.approx(0.1) and anneal_factor(config, 1.3) == pytest.approx(0.1)
    assert anneal_factor(_config(), 0.99) == 1.0  # off by default
    learner = Learner(TINY, dataclasses.replace(config, lr_milestones=(1,), lr_gamma=0.5), seed=0)
    learner.add_shards([_shard(tmp_path)])
    used = []
    for progress in (0.5, 0.8, None):
        learner.train(1, progress)
        used.append(learner.optimizer.param_groups[0]["lr"])
    assert used == pytest.approx([0.1, 0.1 * 0.5 * 0.55, 0.1 * 0.5])  # times the milestones' drops; None: no anneal


# -- resumable state --------------------------------------------------------------------------------------


def _all_tensors(learner: Learner) -> dict[str, torch.Tensor]:
    tensors = {f"net.{k}": v for k, v in learner.net.state_dict().items()}
    for index, state in learner.optimizer.state_dict()["state"].items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"opt.{index}.{key}"] = value
    return tensors


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_state_round_trip_reproduces_the_next_step_exactly(tmp_path, optimizer):
    paths = [_shard(tmp_path, 12, seed=0), _shard(tmp_path, 9, seed=1)]
    config = _config(batch_size=4, lr_milestones=(4,), lr_gamma=0.3, optimizer=optimizer)
    original = Learner(TINY, config, seed=0)
    original.add_shards(paths)
    original.train(3)
    state_path = tmp_path / "learner.pt"
    torch.save(original.state_dict(), state_path)
    state = torch.load(state_path, weights_only=True)  # only tensors and primitives inside

    resumed = Learner(TINY, config, seed=12345)  # other initial weights and random streams
    resumed.add_shards(paths)
    resumed.load_state_dict(state, str(state_path))
    assert (resumed.step, resumed.samples_trained) == (original.step, original.samples_trained)

    for _ in range(2):  # the second step crosses the lr milestone
        a, b = original.train(1), resumed.train(1)
        assert (a.loss, a.value_loss, a.policy_loss, a.learning_rate) == (b.loss, b.value_loss, b.policy_loss, b.learning_rate)
    ours, theirs = _all_tensors(original), _all_tensors(resumed)
    assert ours.keys() == theirs.keys() and any(k.startswith("opt.") for k in ours)
    for key in ours:
        assert torch.equal(ours[key], theirs[key]), key


def test_a_bf16_channels_last_learner_takes_the_fp32_step_to_bf16_rounding_and_resumes_exactly(tmp_path):
    """train.precision bf16 (autocast) and train.channels_last: the same losses and the same update as fp32
    to bf16's rounding, fp32 weights kept, and a state that resumes the next step bit for bit."""
    paths = [_shard(tmp_path, 12, seed=0), _shard(tmp_path, 9, seed=1)]
    fp32 = Learner(TINY, _config(batch_size=8), seed=0)
    fast = Learner(TINY, _config(batch_size=8, precision="bf16", channels_last=True), seed=0)
    assert fast.net.stem[0].weight.is_contiguous(memory_format=torch.channels_last)
    start = {k: v.clone() for k, v in fp32.net.state_dict().items()}
    for learner in (fp32, fast):
        learner.add_shards(paths)
    a, b = fp32.train(1), fast.train(1)
    assert a.loss != b.loss and b.loss == pytest.approx(a.loss, rel=0.02)  # bf16 really ran, and agrees
    assert b.value_loss == pytest.approx(a.value_loss, rel=0.05, abs=0.01)
    for key, value in fast.net.state_dict().items():
        assert value.dtype == start[key].dtype  # the weights stay fp32 (int for the batch-norm step count)
        if value.is_floating_point() and "running" not in key:  # each tensor's update points the fp32 way
            moved, moved_fp32 = value - start[key], fp32.net.state_dict()[key] - start[key]
            assert torch.cosine_similarity(moved.flatten(), moved_fp32.flatten(), dim=0) > 0.9, key
    state_path = tmp_path / "learner.pt"
    torch.save(fast.state_dict(), state_path)
    resumed = Learner(TINY, _config(batch_size=8, precision="bf16", channels_last=True), seed=99)
    resumed.add_shards(paths)
    resumed.load_state_dict(torch.load(state_path, weights_only=True), str(state_path))
    for _ in range(2):
        a, b = fast.train(1), resumed.train(1)
        assert (a.loss, a.value_loss, a.policy_loss) == (b.loss, b.value_loss, b.policy_loss)


def test_a_learner_precision_or_memory_format_outside_the_choices_is_refused():
    from alphazero.config import load_config

    for override, message in (("train.precision=fp16", "train.precision must be auto, fp32 or bf16"),
                              ("train.channels_last=maybe", "train.channels_last must be true, false or auto")):
        with pytest.raises(Exception, match=message):
            load_config("configs/default.yaml", [override])
    assert load_config("configs/default.yaml", ["train.precision=bf16", "train.channels_last=true"]).train.precision == "bf16"


@pytest.mark.parametrize("native", [True, False])
def test_auto_precision_is_bf16_channels_last_on_a_cpu_that_computes_bf16_and_fp32_elsewhere(monkeypatch, native):
    """train.precision/channels_last auto (the defaults) resolve once, for the learner's device: bf16 with
    channels-last where the CPU has bf16 arithmetic, fp32 and contiguous where it has not and on CUDA;
    a value given stays as given."""
    from alphazero.learn import train as train_module

    monkeypatch.setattr(train_module, "cpu_computes_bf16", lambda: native)
    assert (TrainConfig().precision, TrainConfig().channels_last) == ("auto", "auto")
    cpu, cuda = torch.device("cpu"), torch.device("cuda")  # device objects only: no GPU is touched
    resolved = train_module.resolve_precision(TrainConfig(), cpu)
    assert (resolved.precision, resolved.channels_last) == (("bf16", True) if native else ("fp32", False))
    on_cuda = train_module.resolve_precision(TrainConfig(), cuda)
    assert (on_cuda.precision, on_cuda.channels_last) == ("fp32", False)
    given = train_module.resolve_precision(TrainConfig(precision="fp32", channels_last=True), cpu)
    assert (given.precision, given.channels_last) == ("fp32", True)
    learner = Learner(TINY, dataclasses.replace(_config(), precision="auto", channels_last="auto"), seed=0)
    assert (learner.config.precision, learner.config.channels_last) == (("bf16", True) if native else ("fp32", False))
    assert learner.net.stem[0].weight.is_contiguous(memory_format=torch.channels_last) is native


def test_the_candidate_is_the_moving_average_of_the_weights(tmp_path):
    """train.ema_decay d: after steps giving weights w1, w2, w3 the candidate holds w1 averaged on as
    ema = d * ema + (1 - d) * w (parameters and batch-norm statistics); without it, the weights themselves."""
    paths = [_shard(tmp_path, 12, seed=0)]
    decay = 0.75
    learner = Learner(TINY, _config(batch_size=4, ema_decay=decay), seed=0)
    plain = Learner(TINY, _config(batch_size=4), seed=0)
    for each in (learner, plain):
        each.add_shards(paths)
    snapshots = []
    for _ in range(3):
        learner.train(1)
        snapshots.append({k: v.detach().clone().float() for k, v in learner.net.state_dict().items()})
    expected = {k: v.clone() for k, v in snapshots[0].items()}
    for snapshot in snapshots[1:]:
        for key in expected:
            expected[key] = decay * expected[key] + (1 - decay) * snapshot[key]
    candidate = learner.candidate_network().state_dict()
    checked = 0
    for key, value in candidate.items():
        if key.endswith("num_batches_tracked"):
            continue
        assert torch.allclose(value.float(), expected[key], atol=1e-6), key
        checked += 1
    assert checked > 10 and any("running_mean" in key for key in candidate)
    trained = learner.get_network().state_dict()
    assert not all(torch.equal(trained[k], candidate[k]) for k in trained)  # the average is not the last weights
    plain.train(3)
    assert all(torch.equal(v, plain.get_network().state_dict()[k]) for k, v in plain.candidate_network().state_dict().items())


def test_the_average_resumes_exactly_and_starts_from_a_state_without_one(tmp_path):
    paths = [_shard(tmp_path, 12, seed=0)]
    config = _config(batch_size=4, ema_decay=0.9)
    original = Learner(TINY, config, seed=0)
    original.add_shards(paths)
    original.train(3)
    state_path = tmp_path / "learner.pt"
    torch.save(original.state_dict(), state_path)
    resumed = Learner(TINY, config, seed=7)
    resumed.add_shards(paths)
    resumed.load_state_dict(torch.load(state_path, weights_only=True), str(state_path))
    original.train(2)
    resumed.train(2)
    for key, value in original.candidate_network().state_dict().items():
        assert torch.equal(value, resumed.candidate_network().state_dict()[key]), key
    # A state without an average (saved with ema_decay 0, or before the key existed) starts it from its weights.
    off = Learner(TINY, _config(batch_size=4), seed=0)
    off.add_shards(paths)
    off.train(2)
    state = off.state_dict()
    del state["ema"]
    switched = Learner(TINY, config, seed=3)
    switched.load_state_dict(state)
    for key, value in switched.candidate_network().state_dict().items():
        assert torch.equal(value, off.get_network().state_dict()[key]), key


def test_ema_decay_outside_its_range_is_refused():
    from alphazero.config import load_config

    for bad in ("1.0", "-0.1"):
        with pytest.raises(Exception, match="train.ema_decay must be in"):
            load_config("configs/default.yaml", [f"train.ema_decay={bad}"])


def test_state_round_trip_is_needed_for_the_same_step(tmp_path):
    # Control for the test above: without the state, a learner with another seed diverges.
    paths = [_shard(tmp_path, 12, seed=0), _shard(tmp_path, 9, seed=1)]
    config = _config(batch_size=4)
    a, b = Learner(TINY, config, seed=0), Learner(TINY, config, seed=12345)
    for learner in (a, b):
        learner.add_shards(paths)
    assert a.train(1).loss != b.train(1).loss


def test_state_survives_the_atomic_file_helpers(tmp_path):
    learner = Learner(TINY, _config(), seed=0)
    learner.add_shards([_shard(tmp_path)])
    learner.train(2)
    path = tmp_path / "run" / "learner.pt"
    atomic_torch_save(learner.state_dict(), path)
    fresh = Learner(TINY, _config(), seed=7)
    fresh.load_state_dict(safe_torch_load(path), str(path))
    assert fresh.step == 2
    for key, value in learner.net.state_dict().items():
        assert torch.equal(value, fresh.net.state_dict()[key]), key


def test_resumed_learner_can_refill_its_window_from_the_same_shards(tmp_path):
    # A resume through the public API: new Learner, load_state_dict, add_shards(every shard on disk).
    paths = [_shard(tmp_path, 6, seed=0), _shard(tmp_path, 5, seed=1)]
    learner = Learner(TINY, _config(), seed=0)
    learner.add_shards(paths)
    learner.train(1)
    resumed = Learner(TINY, _config(), seed=0)
    resumed.load_state_dict(learner.state_dict())
    assert resumed.add_shards(paths) == 11
    resumed.train(1)


def _corruptions():
    def set_key(key, value):
        return lambda state: state.__setitem__(key, value)

    def drop(key):
        return lambda state: state.pop(key)

    def other_network(state):
        state["network"] = Learner(dataclasses.replace(TINY, channels=16), _config()).get_weights()

    return {
        "wrong format tag": set_key("format", "something-else"),
        "future version": set_key("format_version", 99),
        "no optimizer": drop("optimizer"),
        "no numpy rng": drop("numpy_rng"),
        "no step": drop("step"),
        "network of another shape": other_network,
        "network not a network": set_key("network", {"format": "alphazero-chess-net"}),
        "optimizer without groups": set_key("optimizer", {"state": {}}),
        "torch rng garbage": set_key("torch_rng", torch.zeros(3, dtype=torch.uint8)),
    }


@pytest.mark.parametrize("name", list(_corruptions()))
def test_corrupted_state_raises_value_error_naming_the_source(name):
    state = Learner(TINY, _config(), seed=0).state_dict()
    _corruptions()[name](state)
    with pytest.raises(ValueError) as error:
        Learner(TINY, _config(), seed=1).load_state_dict(state, "RUN/learner.pt")
    assert "RUN/learner.pt" in str(error.value)


def test_state_that_is_not_a_dict_raises_value_error():
    with pytest.raises(ValueError):
        Learner(TINY, _config(), seed=1).load_state_dict([1, 2, 3], "RUN/learner.pt")  # type: ignore[arg-type]


@pytest.mark.parametrize("optimizer", ["garbage", None, [1, 2]])
def test_state_with_a_non_mapping_optimizer_raises_value_error(optimizer):
    state = Learner(TINY, _config(), seed=0).state_dict()
    state["optimizer"] = optimizer
    with pytest.raises(ValueError) as error:
        Learner(TINY, _config(), seed=1).load_state_dict(state, "RUN/learner.pt")
    assert "RUN/learner.pt" in str(error.value)


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_state_file_raises_value_error_naming_it(tmp_path, damage):
    path = tmp_path / "learner.pt"
    atomic_torch_save(Learner(TINY, _config(), seed=0).state_dict(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate" else bytes(range(256)) * 8)
    with pytest.raises(ValueError) as error:
        Learner(TINY, _config(), seed=1).load_state_dict(safe_torch_load(path), str(path))
    assert str(path) in str(error.value)


def test_unfinished_games_take_the_search_value_as_their_target():
    z = np.array([1.0, 0.0, -1.0], dtype=np.float32)
    q = np.array([0.2, 0.6, -0.4], dtype=np.float32)
    known = np.array([True, False, True])
    target, weight = value_targets(z, q, known, _config(q_weight=0.5, value_from_unfinished=True))
    assert weight is None
    assert target == pytest.approx([0.6, 0.6, -0.7])  # finished: mixed; stopped at the cap: q alone
    target, weight = value_targets(z, q, known, _config(q_weight=0.5, value_from_unfinished=False))
    assert target[[0, 2]] == pytest.approx([0.6, -0.7])
    assert weight.tolist() == [1.0, 0.0, 1.0]  # the stopped game trains the policy only


# -- material head ----------------------------------------------------------------------------------------


MATERIAL = dataclasses.replace(TINY, material_head=True)


def test_material_loss_is_the_squared_error_of_the_material_output():
    torch.manual_seed(0)
    net = PolicyValueNet(MATERIAL).eval()
    planes, pi, z = _batch()
    target = torch.tensor([0.5, -0.2, 0.0, 0.9, -0.7])
    total, value_loss, policy_loss, material_loss, _, _ = compute_loss(net, planes, pi, z, material=target,
                                                                 material_weight=0.3)
    with torch.no_grad():
        _, _, material = net.forward_heads(planes)
    assert material is not None
    expected = float(((material - target) ** 2).mean())
    assert material_loss.item() == pytest.approx(expected, rel=1e-5) and expected > 0.01
    assert total.item() == pytest.approx(value_loss.item() + policy_loss.item() + 0.3 * expected, rel=1e-5)
    # Without targets (pretraining's evaluation, diagnose) the term is absent.
    assert compute_loss(net, planes, pi, z)[3].item() == 0.0


def test_learner_trains_the_material_head_toward_the_balance_ahead(tmp_path):
    # Random games lose pieces, so the targets differ between positions; the head learns them.
    learner = Learner(MATERIAL, _config(material_horizon=4), seed=0)
    learner.add_shards([_shard(tmp_path, 60, seed=3)])
    targets = learner.window.shards[0].material
    assert targets is not None and np.ptp(targets) > 0.3
    stats = [learner.train(1) for _ in range(60)]
    assert np.mean([s.material_loss for s in stats[-10:]]) < 0.5 * stats[0].material_loss
    assert stats[0].material_loss > 0.0


# -- moves-left head --------------------------------------------------------------------------------------


MOVES_LEFT = dataclasses.replace(TINY, moves_left_head=True)


def test_moves_left_loss_is_lc0s_huber_over_the_known_positions():
    predicted = torch.tensor([0.5, 2.0, 1.0, 3.0])
    plies = torch.tensor([20.0, 0.0, -1.0, 160.0])  # -1: a game stopped at the length limit
    # targets 1.0, 0.0, (left out), 8.0 in units of 20 plies; Huber delta 0.5
    errors = [0.5, 2.0, 5.0]
    expected = np.mean([0.5 * e * e if e <= 0.5 else 0.5 * (e - 0.25) for e in errors])
    assert moves_left_loss(predicted, plies).item() == pytest.approx(expected, rel=1e-6)
    assert moves_left_loss(predicted, torch.full((4,), -1.0)).item() == 0.0


def test_compute_loss_adds_the_weighted_moves_left_term():
    torch.manual_seed(0)
    net = PolicyValueNet(MOVES_LEFT).eval()
    planes, pi, z = _batch()
    plies = torch.tensor([30.0, -1.0, 4.0, 90.0, 12.0])
    losses = compute_loss(net, planes, pi, z, moves_left=plies, moves_left_weight=0.5)
    with torch.no_grad():
        predicted = net.forward_training(planes).moves_left
    assert predicted is not None
    expected = moves_left_loss(predicted, plies).item()
    assert losses.moves_left.item() == pytest.approx(expected, rel=1e-5) and expected > 0.01
    assert losses.total.item() == pytest.approx(losses.value.item() + losses.policy.item() + 0.5 * expected, rel=1e-5)
    assert compute_loss(net, planes, pi, z).moves_left.item() == 0.0  # no targets: no term


def test_learner_trains_the_moves_left_head_toward_the_plies_left(tmp_path):
    record = _record(60, seed=4)
    record.moves_left = np.arange(60, 0, -1).astype(np.int16)
    capped = _record(20, seed=5, termination=MAX_LENGTH)
    capped.moves_left = np.full(20, -1, np.int16)
    path = tmp_path / "shard-00000000.npz"
    write_shard(path, [record, capped])
    learner = Learner(MOVES_LEFT, _config(), seed=0)
    learner.add_shards([str(path)])
    stats = [learner.train(1) for _ in range(80)]
    assert stats[0].moves_left_loss > 0.0
    assert np.mean([s.moves_left_loss for s in stats[-10:]]) < 0.5 * stats[0].moves_left_loss
