"""Benchmarks of the compiled search against the Python one, same workload, one thread, one process.

Owns the workload and the figures: ``games`` self-play games searched together (noise, temperature
1, tree reuse as configured) for ``moves`` moves each from the start position or from middlegames
(``alphazero.bench.positions.MIDDLEGAMES``, cycled), ``sims`` new simulations per move. A simulation is one a search
added (visits kept from the previous move's tree are not counted again). Timed: the ``search`` calls
and the ``advance`` calls that play the chosen moves, nothing else.

Engines: ``compiled`` (``CompiledMCTS``, the leaves' planes written from the kernel's arrays),
``python`` (``MCTS`` with ``UniformEvaluator``: no encoding at all), ``python+encoding`` (``MCTS``
with the work ``NetworkEvaluator`` does around its network: features, actions, planes, masked
softmax), each with a uniform evaluator (logits and value 0) so the figure is the search's own cost;
and both with the default network (``configs/default.yaml``'s 3x32) batched. Each for both
algorithms: PUCT (unsuffixed keys) and Gumbel (``_gumbel``; no tree reuse, so every simulation is new).

``python -m alphazero.bench.search`` prints every figure as one JSON object (a few minutes).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import chess
import numpy as np

from alphazero.bench.positions import start_boards
from alphazero.bench.shared import startup_seconds
from alphazero.board import encoding
from alphazero.board.game import terminal_status
from alphazero.config import SearchConfig
from alphazero.search.compiled.batch import CompiledMCTS, UniformPlaneEvaluator
from alphazero.search.compiled.tree import CompiledGameTree
from alphazero.search.mcts import MCTS, GameTree


class EncodingUniformEvaluator:
    """``NetworkEvaluator`` without its network: the features, actions, planes and masked softmax a
    Python search pays per leaf, with logits and values 0 (uniform priors)."""

    def prepare(self, board: chess.Board, moves: list[chess.Move]) -> tuple[list[int], np.ndarray]:
        return encoding.board_features(board), encoding.moves_to_actions(board, moves)

    def evaluate(self, requests: list) -> tuple[list[np.ndarray], np.ndarray]:
        from alphazero.nets.evaluator import masked_softmax

        planes = encoding.planes_from_features([features for features, _ in requests])
        logits = np.zeros((len(planes), encoding.NUM_ACTIONS), np.float32)
        return masked_softmax(logits, [actions for _, actions in requests]), np.zeros(len(planes), np.float32)


def run_workload(search: Any, tree_fn, boards: list[chess.Board], sims: int, moves: int, reuse: bool = True) -> dict:
    """Search every game ``moves`` times with ``sims`` simulations; wall and CPU seconds of the search
    and advance calls, and the number of simulations searched."""
    trees = [tree_fn(board, i) for i, board in enumerate(boards)]
    simulations = 0
    wall = cpu = 0.0
    for _ in range(moves):
        trees = [tree for tree in trees if terminal_status(tree.board) is None]
        if not trees:
            break
        started_wall, started_cpu = time.perf_counter(), time.process_time()
        results = search.search(trees, add_noise=True, temperature=1.0, num_simulations=sims)
        for tree, result in zip(trees, results):
            tree.advance(result.move, reuse=reuse)
        wall += time.perf_counter() - started_wall
        cpu += time.process_time() - started_cpu
        simulations += sum(sims for result in results if len(result.moves) > 1)
    return {"simulations": simulations, "wall_s": wall, "cpu_s": cpu}


def _figures(run: dict) -> dict:
    return {"sims_per_s": round(run["simulations"] / run["cpu_s"]),
            "us_per_sim": round(1e6 * run["cpu_s"] / run["simulations"], 2),
            "wall_us_per_sim": round(1e6 * run["wall_s"] / run["simulations"], 2),
            "simulations": run["simulations"]}


def search_overhead(engine: str = "compiled", positions: str = "start", games: int = 48, sims: int = 32,
                    moves: int = 8, config: SearchConfig | None = None) -> dict:
    """The search's own cost (uniform evaluator) per simulation; ``engine`` is ``compiled``, ``python``
    or ``python+encoding``. Rates are per CPU second (``time.process_time``) of this one thread."""
    config = config or SearchConfig(num_simulations=sims)
    boards = start_boards(positions, games)
    if engine == "compiled":
        search: Any = CompiledMCTS(UniformPlaneEvaluator(), config)
        tree_fn: Any = CompiledGameTree
    else:
        from alphazero.nets.evaluator import UniformEvaluator

        search = MCTS(UniformEvaluator() if engine == "python" else EncodingUniformEvaluator(), config)
        tree_fn = GameTree
    run_workload(search, tree_fn, boards[:2], 4, 2, config.reuse_tree)  # compile or load the cache, warm up
    return _figures(run_workload(search, tree_fn, boards, sims, moves, config.reuse_tree))


def search_overhead_us_per_sim(seconds: float = 3.0, moves: int = 16, algorithm: str = "puct") -> float:
    """``alphazero bench``'s ``search_overhead_us_per_sim``: the compiled search (``algorithm``: the configured
    one in ``bench``), uniform evaluator with the encoding, 48 games x 32 simulations for ``moves`` moves from
    the start position (repeated with new games for about ``seconds``), CPU microseconds per simulation."""
    search = CompiledMCTS(UniformPlaneEvaluator(), SearchConfig(num_simulations=32, algorithm=algorithm))
    run_workload(search, CompiledGameTree, start_boards("start", 2), 4, 2)  # compile or load the cache
    simulations, cpu = 0, 0.0
    while cpu < seconds or simulations == 0:
        run = run_workload(search, CompiledGameTree, start_boards("start", 48), 32, moves)
        simulations += run["simulations"]
        cpu += run["cpu_s"]
    return round(1e6 * cpu / simulations, 2)


def network_search(engine: str, network_config: Any, positions: str = "middlegame", games: int = 48,
                   sims: int = 32, moves: int = 3, search_config: SearchConfig | None = None,
                   threads: int | None = 1, device: str = "cpu") -> dict:
    """Simulations per CPU second (per wall second on a GPU) with a (random-weight) network of
    ``network_config`` on ``threads`` torch threads (None: as set), and the raw network's positions per
    second at the same batch, ``games`` x ``leaves_per_game`` (``of_network``: the search's share of it)."""
    import torch

    from alphazero.nets.evaluator import NetworkEvaluator
    from alphazero.nets.network import PolicyValueNet

    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = search_config or SearchConfig(num_simulations=sims)
    evaluator = NetworkEvaluator.for_search(PolicyValueNet(network_config).eval(), config, device=device,
                                            max_batch=games * config.leaves_per_game)
    boards = start_boards(positions, games)
    if engine == "compiled":
        search: Any = CompiledMCTS(evaluator, config)
        tree_fn: Any = CompiledGameTree
    else:
        search = MCTS(evaluator, config)
        tree_fn = GameTree
    # Warm up on every game: the forest grows to its size (copying every slot at each doubling) in the
    # first searches of a new set of games, which a long self-play run pays once, not every move.
    run_workload(search, tree_fn, boards, 4, 2, config.reuse_tree)
    run = run_workload(search, tree_fn, start_boards(positions, games), sims, moves, config.reuse_tree)
    figures = _figures(run)
    # On the CPU a rate is per CPU second of this thread; on a GPU per wall second (the GPU's time is
    # not the process's, and the search waits for it).
    clock = time.process_time if device == "cpu" else time.perf_counter
    if device != "cpu":
        figures["sims_per_s"] = round(run["simulations"] / run["wall_s"])
    planes = encoding.encode_boards(start_boards(positions, games * config.leaves_per_game))
    evaluator.forward(planes)
    started, calls = clock(), 0
    while clock() - started < 2.0:
        evaluator.forward(planes)
        calls += 1
    figures["net_positions_per_s"] = round(calls * len(planes) / (clock() - started))
    figures["of_network"] = round(figures["sims_per_s"] / figures["net_positions_per_s"], 3)
    return figures


def bench_figures(config: Any, seconds: float = 3.0, device: str = "cpu") -> dict:
    """What ``alphazero bench`` reports for the compiled search: ``search_overhead_us_per_sim`` and the
    self-play batch searched with the configured network (``config`` a ``RunConfig``; torch threads as set)."""
    games, sims = config.selfplay.games_per_worker, config.search.num_simulations
    moves = max(2, int(seconds * 3000 / sims / games))  # as suite.bench_search sizes its run
    batched = network_search("compiled", config.network, "middlegame", games, sims, moves, config.search, None,
                             device)
    return {"search_overhead_us_per_sim": search_overhead_us_per_sim(seconds, algorithm=config.search.algorithm),
            "search_batched_sims_per_s_compiled": batched["sims_per_s"]}


# A fresh interpreter's import of the compiled search and its first search (``startup_seconds``).
FIRST_SEARCH = ("import chess\n"
                "from alphazero.search.compiled.batch import CompiledMCTS, UniformPlaneEvaluator\n"
                "from alphazero.search.compiled.tree import CompiledGameTree\n"
                "CompiledMCTS(UniformPlaneEvaluator()).search([CompiledGameTree(chess.Board(), 0)], add_noise=True, "
                "temperature=1.0, num_simulations=16)[0].move")


def main() -> None:
    from alphazero.bench.shared import default_config_path
    from alphazero.config import load_config

    config = load_config(default_config_path())
    report: dict[str, Any] = {}
    for algorithm, suffix in (("puct", ""), ("gumbel", "_gumbel")):
        search = replace(config.search, algorithm=algorithm)
        for positions in ("start", "middlegame"):
            for engine in ("compiled", "python", "python+encoding"):
                moves = 8 if engine == "compiled" else 2
                report[f"uniform_{positions}_{engine}{suffix}"] = search_overhead(engine, positions, 48, 32, moves,
                                                                                  search)
        for engine in ("compiled", "python"):
            report[f"network_middlegame_{engine}{suffix}"] = network_search(engine, config.network, "middlegame", 48,
                                                                            32, 3, search)
    report["startup_seconds"] = startup_seconds(FIRST_SEARCH)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
