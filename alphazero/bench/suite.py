"""What ``alphazero bench`` prints: the figures of the hot paths, as one dict. This is slow (~1 minute).

All on one torch thread with the default network (``configs/default.yaml``): encoding, the network at batch 1 and at the
self-play batch (with each inference backend, ``net_batched_per_s_onnx``..., and ONNX Runtime's int8,
``..._onnx_int8``; unsuffixed: what ``search.backend`` and ``search.precision`` run), and
the search, with ``search.backend``, one game at a time versus many games at once; the learner's samples/s
(``learner_samples_per_s``: with ``bench --selfplay``'s positions/s it says which side bounds a run).
"""

from __future__ import annotations

import platform
import time
from dataclasses import replace
from typing import Any

import chess
import torch

from alphazero.bench.learner import learner_samples_per_s
from alphazero.bench.positions import sample_positions
from alphazero.bench.search import search_overhead_us_per_sim
from alphazero.bench.shared import timed
from alphazero.board import encoding
from alphazero.config import RunConfig, SearchConfig
from alphazero.nets.evaluator import NetworkEvaluator
from alphazero.nets.inference import CALIBRATION_POSITIONS, available_backends, resolve_inference
from alphazero.nets.network import PolicyValueNet
from alphazero.search.factory import build_search


def bench_encoding(boards: list[chess.Board], seconds: float) -> float:
    calls, elapsed = timed(lambda: encoding.encode_boards(boards), seconds)
    return calls * len(boards) / elapsed


def bench_network(net: PolicyValueNet, boards: list[chess.Board], batch: int, seconds: float, device: str = "cpu",
                  backend: str = "auto", search: SearchConfig | None = None, precision: str = "auto") -> float:
    """Positions/s of the network alone; the torch backend as ``search``'s precision, channels_last and
    pin_memory say (auto unless given); onnx and openvino in ``precision`` (their own ``auto`` unless given;
    int8 is calibrated on ``boards`` first)."""
    if search is None or backend in ("onnx", "openvino"):
        evaluator = NetworkEvaluator(net, device=device, backend=backend, precision=precision)
    else:
        # the torch backend in the search's torch settings (int8 is ONNX Runtime's: torch's own auto precision then)
        torch_precision = "auto" if search.precision == "int8" else search.precision
        evaluator = NetworkEvaluator.for_search(net, replace(search, backend=backend, precision=torch_precision),
                                                device=device)
    if evaluator.settings.precision == "int8":
        evaluator.forward(encoding.encode_boards(boards[:CALIBRATION_POSITIONS]))  # quantises
    planes = encoding.encode_boards(boards[:batch])
    evaluator.forward(planes)  # warm-up
    calls, elapsed = timed(lambda: evaluator.forward(planes), seconds)
    return calls * batch / elapsed


def bench_search(net: PolicyValueNet, config: RunConfig, num_games: int, moves: int, seed: int = 0,
                 device: str = "cpu") -> float:
    """New simulations per second searching ``num_games`` self-play games together for ``moves`` moves
    with the configured search (``search.implementation``: compiled or Python); visits a reused subtree
    brought along are not counted."""
    evaluator = NetworkEvaluator.for_search(net, config.search, device=device, selfplay=True)
    mcts, new_tree = build_search(evaluator, config.search)
    starts = sample_positions(num_games, seed=seed + 1)
    trees = [new_tree(board, i) for i, board in enumerate(starts)]
    mcts.search(trees[:1], add_noise=True, num_simulations=8)  # warm-up (and the compiled search's cache)
    trees = [new_tree(board, i) for i, board in enumerate(starts)]
    simulations = 0
    start = time.perf_counter()
    for _ in range(moves):
        trees = [t for t in trees if not t.board.is_game_over()]
        if not trees:
            break
        results = mcts.search(trees, add_noise=True, temperature=1.0)
        for tree, result in zip(trees, results):
            simulations += config.search.num_simulations if len(result.moves) > 1 else 0
            tree.advance(result.move, reuse=config.search.reuse_tree)
    return simulations / (time.perf_counter() - start)


def bench_alphabeta() -> dict[str, Any]:
    """The compiled board and alpha-beta, one core (``alphazero.bench.alphabeta``): perft leaves/s
    (start position, depth 5), ``ab:material`` search nodes/s over ten middlegames to depth 8, and
    the same positions searched with the default NNUE (features all, perspective, L1 128, crelu,
    quantised; random weights of that shape), per CPU second."""
    from alphazero.bench.alphabeta import ab_nnue_nodes_per_s, ab_nodes_per_s, perft_nodes_per_s

    return {"perft_nodes_per_s": round(perft_nodes_per_s()), "ab_nodes_per_s": round(ab_nodes_per_s()),
            "ab_nnue_nodes_per_s": round(ab_nnue_nodes_per_s())}


def bench_nnue_training(seconds: float) -> dict[str, int]:
    """NNUE training throughput (``alphazero.bench.nnue``): positions/s of the default net (``all``
    768 -> 128x2 -> 1, batch 4096, AdamW) on one and on two torch threads."""
    from alphazero.bench.nnue import nnue_train_positions_per_s

    steps = max(2, int(seconds * 5))
    return {f"nnue_train_positions_per_s_{threads}t": round(nnue_train_positions_per_s(threads, steps=steps))
            for threads in (1, 2)}


def bench_backends(net: PolicyValueNet, boards: list[chess.Board], batch: int, seconds: float, device: str,
                   search: SearchConfig | None = None) -> dict[str, int]:
    """The network's positions/s at batch 1 and at ``batch`` with each inference backend that runs on
    ``device`` (``net_batch1_per_s_torch``, ``net_batched_per_s_onnx``...; torch as ``search`` says), and
    ONNX Runtime's int8 (``..._onnx_int8``)."""
    figures = {}
    variants = [(backend, backend, "auto") for backend in available_backends(torch.device(device))]
    if "onnx" in available_backends(torch.device(device)):
        variants.append(("onnx_int8", "onnx", "int8"))
    for name, backend, precision in variants:
        for size, key in ((1, "batch1"), (batch, "batched")):
            figures[f"net_{key}_per_s_{name}"] = round(bench_network(net, boards, size, seconds, device, backend, search,
                                                                    precision))
    return figures


def run_benchmarks(config: RunConfig, seconds: float = 3.0, threads: int = 1, device: str = "cpu") -> dict[str, Any]:
    """All figures as one dict (what ``alphazero bench --json`` prints)."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = PolicyValueNet(config.network).eval()
    boards = sample_positions(2048)
    batch = config.selfplay.games_per_worker * config.search.leaves_per_game
    sims = config.search.num_simulations
    # The configured search above; the other algorithm (gumbel or puct) beside it, as auto builds it (compiled).
    other = "gumbel" if config.search.algorithm == "puct" else "puct"
    other_config = replace(config, search=replace(config.search, algorithm=other, implementation="auto"))
    python_config = replace(config, search=replace(config.search, implementation="python"))
    batched_moves = max(2, int(seconds * 3000 / sims / config.selfplay.games_per_worker))
    search = config.search
    backend, settings = resolve_inference(torch.device(device), search.backend, search.precision,
                                          search.channels_last, search.pin_memory, auto_int8=True)  # self-play's
    nets = bench_backends(net, boards, batch, seconds, device, search)
    searched = backend + ("_int8" if settings.precision == "int8" else "")  # the searches' figure
    return {
        "search_algorithm": config.search.algorithm,
        "search_implementation": config.search.implementation,
        "threads": threads,
        "network": f"{config.network.blocks}x{config.network.channels}",
        "selfplay_batch": batch,
        "num_simulations": sims,
        "encode_per_s": round(bench_encoding(boards, seconds)),
        "backend": backend,
        "inference": settings.precision + ("+cl" if settings.channels_last else "") + ("+pin" if settings.pin_memory else ""),
        "net_batch1_per_s": nets[f"net_batch1_per_s_{searched}"],
        "net_batched_per_s": nets[f"net_batched_per_s_{searched}"],
        **nets,
        "search_batch1_sims_per_s": round(bench_search(net, config, 1, moves=max(3, int(seconds * 1500 / sims)), device=device)),
        "search_batched_sims_per_s": round(bench_search(net, config, config.selfplay.games_per_worker, moves=batched_moves, device=device)),
        "search_batched_sims_per_s_python": round(bench_search(net, python_config, config.selfplay.games_per_worker, moves=batched_moves, device=device)),
        "search_batched_sims_per_s_" + other: round(bench_search(net, other_config, config.selfplay.games_per_worker, moves=batched_moves, device=device)),
        "search_overhead_us_per_sim": search_overhead_us_per_sim(seconds, algorithm=config.search.algorithm),
        **learner_samples_per_s(config, seconds, threads, device),
        **bench_alphabeta(),
        **bench_nnue_training(seconds),
        "device": device,
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
    }
