"""Gumbel AlphaZero search (``search.algorithm: gumbel``): the paper's formulas on hand-made values,
sequential halving's budget, best-move choice with a perfect evaluator, and the O(tried) interior
selection against the full formula."""

from __future__ import annotations

import math

import chess
import numpy as np
import pytest
from test_mcts import MATE_IN_ONE, RecordingEvaluator, mating_moves

from alphazero.nets.evaluator import UniformEvaluator
from alphazero.search.mcts import (
    MCTS,
    GameTree,
    Node,
    SearchConfig,
    completed_q_transform,
    considered_visit_sequence,
    gumbel_policy,
)

GUMBEL = dict(algorithm="gumbel")


def test_policy_target_on_hand_made_q_values_matches_the_paper() -> None:
    priors = np.array([0.5, 0.3, 0.15, 0.05])
    visits = np.array([4, 2, 0, 0])
    q = np.array([0.2, -0.4, 0.0, 0.0])  # for the node's mover; unvisited entries unused
    raw_value = 0.1
    # The paper, written out: v_mix = (v + N * sum_visited p q / sum_visited p) / (1 + N), N = 6.
    v_mix = (0.1 + 6 * (0.5 * 0.2 + 0.3 * -0.4) / 0.8) / 7
    completed = [0.2, -0.4, v_mix, v_mix]
    low, high = min(completed), max(completed)
    sigma = [(50 + 4) * 0.1 * (c - low) / (high - low) for c in completed]
    logits = [math.log(p) + s for p, s in zip(priors, sigma)]
    expected = np.exp(np.array(logits) - max(logits))
    expected /= expected.sum()
    got_sigma = completed_q_transform(priors, visits, q * visits, raw_value, c_visit=50.0, c_scale=0.1)
    assert got_sigma == pytest.approx(sigma)
    assert gumbel_policy(priors, got_sigma) == pytest.approx(expected, rel=1e-5)
    # Without visits every action is completed with the network's value: the target is the prior.
    flat = completed_q_transform(priors, np.zeros(4), np.zeros(4), 0.3, 50.0, 0.1)
    assert gumbel_policy(priors, flat) == pytest.approx(priors, rel=1e-5)


@pytest.mark.parametrize("considered,simulations", [(16, 32), (16, 8), (4, 50), (2, 7), (1, 5), (30, 200)])
def test_sequential_halving_schedule_spends_exactly_the_budget(considered, simulations) -> None:
    sequence = considered_visit_sequence(considered, simulations)
    assert len(sequence) == simulations
    # Replaying the schedule: each entry is the visit count the chosen action has before the visit.
    visits = [0] * max(considered, 1)
    for target in sequence:
        candidates = [i for i, v in enumerate(visits) if v == target]
        assert candidates, "the schedule asks for a visit count no considered action has"
        visits[candidates[0]] += 1
    assert sum(visits) == simulations


@pytest.mark.parametrize("simulations", [8, 32, 64])
def test_search_spends_exactly_the_budget_on_the_considered_actions(simulations) -> None:
    start = chess.Board()
    tree = GameTree(start, seed=3)
    config = SearchConfig(num_simulations=simulations, gumbel_considered=16, **GUMBEL)
    result = MCTS(RecordingEvaluator("hash"), config).search([tree], add_noise=True)[0]
    assert int(result.visit_counts.sum()) == simulations
    assert np.count_nonzero(result.visit_counts) == min(16, simulations)
    # The move played is one of the most visited (the survivors of the last halving).
    assert result.visit_counts[result.moves.index(result.move)] == result.visit_counts.max()
    # The target is dense over the legal moves and sums to one.
    assert len(result.pi) == 20 and result.pi.min() > 0 and result.pi.sum() == pytest.approx(1.0)
    assert result.target_counts.sum() == pytest.approx(60_000, abs=20)


@pytest.mark.parametrize("fen", MATE_IN_ONE)
def test_with_the_true_results_it_picks_the_mating_move(fen) -> None:
    b = chess.Board(fen)
    config = SearchConfig(num_simulations=64, gumbel_considered=64, **GUMBEL)
    tree = GameTree(b, seed=0)
    result = MCTS(UniformEvaluator(), config).search([tree])[0]
    assert result.move in mating_moves(b)
    # The improved policy puts the most weight on a mate.
    assert result.moves[int(np.argmax(result.pi))] in mating_moves(b)


class _MaterialEvaluator:
    """A perfect evaluator for positions where winning material is the whole story."""

    values = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}

    def prepare(self, board: chess.Board, moves: list[chess.Move]) -> tuple[float, int]:
        score = sum(v * (len(board.pieces(p, board.turn)) - len(board.pieces(p, not board.turn)))
                    for p, v in self.values.items())
        return math.tanh(score / 5), len(moves)

    def evaluate(self, requests):
        return ([np.full(n, 1.0 / n, dtype=np.float32) for _, n in requests],
                np.array([v for v, _ in requests], dtype=np.float32))


def test_with_a_perfect_evaluator_it_takes_the_free_queen() -> None:
    b = chess.Board("4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1")  # Rxd5 wins the queen, nothing else wins anything
    capture = chess.Move.from_uci("d2d5")
    config = SearchConfig(num_simulations=32, **GUMBEL)
    # Without Gumbel noise (evaluation) the search is deterministic and plays the capture.
    result = MCTS(_MaterialEvaluator(), config).search([GameTree(b, seed=0)])[0]
    assert result.move == capture
    # With noise (self-play) the move played explores, but the policy target is sure of the capture.
    for seed in range(5):
        result = MCTS(_MaterialEvaluator(), config).search([GameTree(b, seed=seed)], add_noise=True)[0]
        assert result.moves[int(np.argmax(result.pi))] == capture and result.pi.max() > 0.9


def _brute_force_interior(node: Node, config: SearchConfig) -> int:
    """``argmax pi'(a) - N(a) / (1 + sum N)`` over every legal move, straight from the formula."""
    sigma = completed_q_transform(np.array(node.prior_list), node.child_visits, node.child_values, node.raw_value,
                                  config.gumbel_c_visit, config.gumbel_c_scale)
    pi = gumbel_policy(np.array(node.prior_list), sigma).astype(np.float64)
    visits = np.array(node.child_visits, dtype=np.float64)
    return int(np.argmax(pi - visits / (1 + visits.sum())))


def test_interior_selection_scoring_only_tried_moves_equals_the_full_formula() -> None:
    rng = np.random.default_rng(0)
    config = SearchConfig(**GUMBEL)
    mcts = MCTS(UniformEvaluator(), config)
    for trial in range(300):
        count = int(rng.integers(2, 30))
        priors = rng.dirichlet(np.full(count, 0.5)).astype(np.float32)
        node = Node()
        node.moves = [chess.Move(0, 1)] * count
        node.expand(priors, float(rng.uniform(-1, 1)))
        tried = rng.choice(count, size=int(rng.integers(0, count + 1)), replace=False)
        for i in tried:
            n = int(rng.integers(1, 20))
            node.children[i] = Node()
            node.tried.append(int(i))
            node.child_visits[i] = n
            node.child_values[i] = float(n * rng.uniform(-1, 1))
        chosen = mcts._gumbel_interior_index(node)
        expected = _brute_force_interior(node, config)
        if chosen != expected:  # only an exact tie may differ
            sigma = completed_q_transform(priors, node.child_visits, node.child_values, node.raw_value, 50.0, 0.1)
            pi = gumbel_policy(priors, sigma).astype(np.float64)
            visits = np.array(node.child_visits, dtype=np.float64)
            score = pi - visits / (1 + visits.sum())
            assert score[chosen] == pytest.approx(score[expected], abs=1e-6), trial


def test_gumbel_is_deterministic_without_noise_and_batched_like_puct() -> None:
    boards = [chess.Board(), chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")]
    config = SearchConfig(num_simulations=24, **GUMBEL)
    evaluator = RecordingEvaluator("hash")
    together = MCTS(evaluator, config).search([GameTree(b, seed=1) for b in boards])
    assert max(evaluator.batch_sizes) == 2  # one network call per round for both games
    alone = [MCTS(RecordingEvaluator("hash"), config).search([GameTree(b, seed=9)])[0] for b in boards]
    for a, b in zip(together, alone):
        assert a.move == b.move and np.array_equal(a.visit_counts, b.visit_counts)
        assert a.pi == pytest.approx(b.pi)


def test_config_rejects_an_unknown_algorithm() -> None:
    with pytest.raises(ValueError, match="search.algorithm"):
        SearchConfig(algorithm="alphabeta")
