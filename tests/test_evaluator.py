"""Tests for the search/network seam (``alphazero.nets.evaluator``).

References are computed independently: a plain per-row numpy softmax for ``masked_softmax``, and the
unfused ``PolicyValueNet`` in eval mode on ``encode_board`` planes, gathered at ``move_to_action`` of
each legal move, for ``NetworkEvaluator`` (this checks the BatchNorm folding and the action gather), which
the tests that compare to 1e-4 run in fp32 (``auto`` would take bf16 on a CPU that computes it natively).
"""

from __future__ import annotations

import random

import chess
import numpy as np
import pytest
import torch

from alphazero.board import encoding
from alphazero.config import NetworkConfig, SearchConfig
from alphazero.nets.evaluator import NetworkEvaluator, UniformEvaluator, masked_softmax
from alphazero.nets.network import PolicyValueNet
from alphazero.search.mcts import MCTS, GameTree

torch.set_num_threads(1)

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)

SPECIAL_FENS = [
    chess.STARTING_FEN,
    "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",  # Black to move
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",  # both castlings, White
    "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1",  # both castlings, Black
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1",  # en passant
    "1n2k3/P7/8/8/8/8/7p/4K1N1 w - - 0 1",  # White promotions incl. underpromotions and captures
    "1n2k3/P7/8/8/8/8/7p/4K1N1 b - - 0 1",  # Black promotions incl. capture on g1
    "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1",
]


def reference_softmax(row: np.ndarray, actions: np.ndarray) -> np.ndarray:
    x = np.array([float(row[a]) for a in actions], dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def random_positions(count: int, seed: int = 0) -> list[chess.Board]:
    """``count`` distinct unfinished positions: the special FENs, then random playouts of varied length."""
    rng = random.Random(seed)
    boards = [chess.Board(fen) for fen in SPECIAL_FENS]
    seen = {b.fen() for b in boards}
    while len(boards) < count:
        b = chess.Board()
        for _ in range(rng.randint(1, 120)):
            moves = list(b.legal_moves)
            if not moves:
                break
            b.push(rng.choice(moves))
        if b.is_game_over(claim_draw=True) or b.fen() in seen:
            continue
        seen.add(b.fen())
        boards.append(b)
    for b in boards:
        assert b.is_valid() and any(b.legal_moves)
    return boards


def make_net(seed: int = 0) -> PolicyValueNet:
    """A tiny net whose BatchNorms are far from identity, so wrong folding would show."""
    torch.manual_seed(seed)
    net = PolicyValueNet(TINY)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.3, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.3, 0.3)
        net.policy_head[-1].weight.mul_(6.0)  # spread the logits so priors are far from uniform
        net.policy_head[-1].bias.uniform_(-1.0, 1.0)
    return net


@pytest.fixture(scope="module")
def net() -> PolicyValueNet:
    return make_net()


@pytest.fixture(scope="module")
def positions() -> list[chess.Board]:
    return random_positions(50)


def direct_reference(net: PolicyValueNet, b: chess.Board) -> tuple[list[chess.Move], np.ndarray, float]:
    """The unfused network in eval mode on one board; softmax of logits at each legal move's action."""
    was_training = net.training
    net.eval()
    try:
        planes = torch.from_numpy(np.ascontiguousarray(encoding.encode_board(b)[None]))
        with torch.no_grad():
            logits, value = net(planes)
    finally:
        net.train(was_training)
    moves = list(b.legal_moves)
    actions = np.array([encoding.move_to_action(b, m) for m in moves])
    assert len(set(actions.tolist())) == len(moves)
    return moves, reference_softmax(logits[0].double().numpy(), actions), float(value[0])


# --------------------------------------------------------------------------------------------------
# masked_softmax


def test_masked_softmax_matches_per_row_reference():
    rng = np.random.default_rng(0)
    sizes = [1, 5, 20, 218, 1, 4672, 37]
    logits = (rng.normal(size=(len(sizes), encoding.NUM_ACTIONS)) * 4.0).astype(np.float32)
    actions = [rng.choice(encoding.NUM_ACTIONS, size=k, replace=False) for k in sizes]  # unsorted
    out = masked_softmax(logits, actions)
    assert len(out) == len(sizes)
    for row, acts, probs in zip(logits, actions, out):
        assert probs.dtype == np.float32
        assert probs.shape == (len(acts),)
        np.testing.assert_allclose(probs, reference_softmax(row, acts), rtol=1e-5, atol=1e-7)
        assert float(probs.sum()) == pytest.approx(1.0, abs=1e-5)
    assert out[0].tolist() == [1.0] and out[4].tolist() == [1.0]


def test_masked_softmax_is_stable_for_large_logits_and_keeps_rows_apart():
    rng = np.random.default_rng(1)
    logits = np.zeros((3, encoding.NUM_ACTIONS), dtype=np.float32)
    logits[0] = rng.uniform(900.0, 1000.0, size=encoding.NUM_ACTIONS)
    logits[1] = rng.uniform(-1000.0, -900.0, size=encoding.NUM_ACTIONS)
    logits[2] = rng.normal(size=encoding.NUM_ACTIONS)
    # Rows share action indices; each must use its own row's logits.
    actions = [np.array([3, 100, 4000]), np.array([4000, 3, 100, 7]), np.array([100, 3])]
    out = masked_softmax(logits, actions)
    for row, acts, probs in zip(logits, actions, out):
        assert np.isfinite(probs).all()
        np.testing.assert_allclose(probs, reference_softmax(row, acts), rtol=1e-5, atol=1e-7)


def test_masked_softmax_empty_row():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(3, encoding.NUM_ACTIONS)).astype(np.float32)
    actions = [np.array([1, 2, 3]), np.array([], dtype=np.int64), np.array([9, 8])]
    out = masked_softmax(logits, actions)
    assert [len(p) for p in out] == [3, 0, 2]
    np.testing.assert_allclose(out[0], reference_softmax(logits[0], actions[0]), rtol=1e-5)
    np.testing.assert_allclose(out[2], reference_softmax(logits[2], actions[2]), rtol=1e-5)


# --------------------------------------------------------------------------------------------------
# UniformEvaluator


def test_uniform_evaluator():
    b = chess.Board()
    moves = list(b.legal_moves)
    ev = UniformEvaluator()
    priors, values = ev.evaluate([ev.prepare(b, moves), ev.prepare(b, moves[:3])])
    np.testing.assert_allclose(priors[0], np.full(len(moves), 1.0 / len(moves)))
    np.testing.assert_allclose(priors[1], np.full(3, 1.0 / 3))
    assert values.tolist() == [0.0, 0.0]


# --------------------------------------------------------------------------------------------------
# NetworkEvaluator


def _evaluate_boards(ev: NetworkEvaluator, boards: list[chess.Board]):
    requests = [ev.prepare(b, list(b.legal_moves)) for b in boards]
    return ev.evaluate(requests)


def test_network_evaluator_priors_and_values_are_well_formed(net, positions):
    ev = NetworkEvaluator(net)
    priors, values = _evaluate_boards(ev, positions)
    assert len(priors) == len(positions) and values.shape == (len(positions),)
    for b, p in zip(positions, priors):
        assert p.shape == (b.legal_moves.count(),)
        assert (p >= 0).all()
        assert float(p.sum()) == pytest.approx(1.0, abs=1e-5)
    assert np.isfinite(values).all()
    assert (values >= -1.0).all() and (values <= 1.0).all()
    # The priors are genuinely position dependent (not a uniform fallback).
    assert any(float(p.max() - p.min()) > 0.05 for p in priors)


def test_network_evaluator_batch_independent_and_equal_to_unfused_net(net, positions):
    state_before = {k: v.clone() for k, v in net.state_dict().items()}
    net.train()  # the evaluator must not depend on (or change) the caller's module mode
    ev = NetworkEvaluator(net, precision="fp32")
    assert net.training
    for key, tensor in net.state_dict().items():
        assert torch.equal(tensor, state_before[key]), key

    batch_priors, batch_values = _evaluate_boards(ev, positions)
    for i, b in enumerate(positions):
        alone_priors, alone_values = _evaluate_boards(ev, [b])
        np.testing.assert_allclose(alone_priors[0], batch_priors[i], atol=1e-4)
        assert alone_values[0] == pytest.approx(batch_values[i], abs=1e-4)

        moves, ref_priors, ref_value = direct_reference(net, b)
        np.testing.assert_allclose(batch_priors[i], ref_priors, atol=1e-4, err_msg=b.fen())
        assert batch_values[i] == pytest.approx(ref_value, abs=1e-4), b.fen()


def test_network_evaluator_max_batch_split(net, positions):
    whole = NetworkEvaluator(net, precision="fp32")
    split = NetworkEvaluator(net, max_batch=7, precision="fp32")
    whole_priors, whole_values = _evaluate_boards(whole, positions)
    split_priors, split_values = _evaluate_boards(split, positions)
    assert split.num_calls == -(-len(positions) // 7)
    assert split.num_positions == len(positions)
    assert whole.num_calls == 1
    np.testing.assert_allclose(split_values, whole_values, atol=1e-4)
    for a, b in zip(split_priors, whole_priors):
        np.testing.assert_allclose(a, b, atol=1e-4)
    empty_priors, empty_values = NetworkEvaluator(net, precision="fp32").evaluate([])
    assert empty_priors == [] and len(empty_values) == 0


def test_network_evaluator_policy(net, positions):
    ev = NetworkEvaluator(net, precision="fp32")
    boards = positions[:12]
    out = ev.policy(boards)
    assert len(out) == len(boards)
    for b, (moves, priors, value) in zip(boards, out):
        assert len(moves) == len(set(moves))
        assert set(moves) == set(b.legal_moves)
        assert priors.shape == (len(moves),)
        assert float(priors.sum()) == pytest.approx(1.0, abs=1e-5)
        assert isinstance(value, float) and -1.0 <= value <= 1.0
        # Priors line up with the moves they are returned with.
        ref_moves, ref_priors, ref_value = direct_reference(net, b)
        ref = dict(zip(ref_moves, ref_priors))
        np.testing.assert_allclose(priors, [ref[m] for m in moves], atol=1e-4)
        assert value == pytest.approx(ref_value, abs=1e-4)


def test_network_evaluator_set_network_swaps_weights(positions):
    first, second = make_net(1), make_net(2)
    ev = NetworkEvaluator(first, precision="fp32")
    boards = positions[:6]
    ev.set_network(second)
    priors, values = _evaluate_boards(ev, boards)
    for b, p, v in zip(boards, priors, values):
        _, ref_priors, ref_value = direct_reference(second, b)
        np.testing.assert_allclose(p, ref_priors, atol=1e-4)
        assert v == pytest.approx(ref_value, abs=1e-4)


def test_search_with_network_evaluator(net):
    boards = [chess.Board(fen) for fen in SPECIAL_FENS[:4]]
    ev = NetworkEvaluator(net, precision="fp32")
    trees = [GameTree(b, seed=i) for i, b in enumerate(boards)]
    results = MCTS(ev, SearchConfig(num_simulations=24, leaves_per_game=2)).search(trees, add_noise=True, temperature=1.0)
    for b, tree, result in zip(boards, trees, results):
        assert set(result.moves) == set(b.legal_moves)
        assert int(result.visit_counts.sum()) == 24
        assert float(result.pi.sum()) == pytest.approx(1.0, abs=1e-5)
        ref_moves, ref_priors, _ = direct_reference(net, b)
        by_move = dict(zip(ref_moves, ref_priors))
        np.testing.assert_allclose(result.priors, [by_move[m] for m in result.moves], atol=1e-4)
    # All games' leaves went through few, batched network calls.
    assert ev.num_calls < 24 * len(boards)


def test_policy_temperature_divides_the_logits_and_flattens_the_priors(net, positions):
    """``policy_temperature`` T: every logit divided by T, so the priors are softmax(logits / T) over the
    legal moves, through ``forward`` (the compiled search's path) and ``evaluate`` (the Python search's);
    values unchanged. T > 1 flattens each position's priors (higher entropy)."""
    boards = positions[:8]
    plain, warm = NetworkEvaluator(net), NetworkEvaluator(net, policy_temperature=2.0)
    planes = np.stack([encoding.encode_board(b) for b in boards])
    logits, values = (np.array(a) for a in plain.forward(planes))
    warm_logits, warm_values = warm.forward(planes)
    np.testing.assert_allclose(warm_logits, logits / 2.0, rtol=1e-6)
    np.testing.assert_array_equal(warm_values, values)
    priors, _ = _evaluate_boards(plain, boards)
    warm_priors, _ = _evaluate_boards(warm, boards)

    def entropy(x: np.ndarray) -> float:
        return float(-(x * np.log(np.maximum(x, 1e-12))).sum())

    for row, (board, p, q) in enumerate(zip(boards, priors, warm_priors)):
        actions = encoding.moves_to_actions(board, list(board.legal_moves))
        np.testing.assert_allclose(q, masked_softmax(logits[row:row + 1] / 2.0, [actions])[0], atol=1e-5)
        if len(p) > 1:
            assert entropy(q) > entropy(p), board.fen()
    assert NetworkEvaluator.for_search(net, SearchConfig(policy_temperature=1.5)).policy_temperature == 1.5
    with pytest.raises(ValueError, match="policy_temperature must be > 0"):
        NetworkEvaluator(net, policy_temperature=0.0)
    with pytest.raises(ValueError, match="search.policy_temperature must be > 0"):
        SearchConfig(policy_temperature=-1.0)
