"""The benchmarks' fixed positions: ten middlegames, random-game positions, start boards."""

from __future__ import annotations

import chess
import numpy as np

# Bratko-Kopec middlegames (1-5, 7, 9, 10), "kiwipete" and the sixth perft position of the Chess
# Programming Wiki: open and closed, both sides to move, castled and not.
MIDDLEGAMES = [
    "1k1r4/pp1b1R2/3q2pp/4p3/2B5/4Q3/PPP2B2/2K5 b - - 0 1",
    "3r1k2/4npp1/1ppr3p/p6P/P2PPPP1/1NR5/5K2/2R5 w - - 0 1",
    "2q1rr1k/3bbnnp/p2p1pp1/2pPp3/PpP1P1P1/1P2BNNP/2BQ1PRK/7R b - - 0 1",
    "rnbqkb1r/p3pppp/1p6/2ppP3/3N4/2P5/PPP1QPPP/R1B1KB1R w KQkq - 0 1",
    "r1b2rk1/2q1b1pp/p2ppn2/1p6/3QP3/1BN1B3/PPP3PP/R4RK1 w - - 0 1",
    "1nk1r1r1/pp2n1pp/4p3/q2pPp1N/b1pP1P2/B1P2R2/2P1B1PP/R2Q2K1 w - - 0 1",
    "2kr1bnr/pbpq4/2n1pp2/3p3p/3P1P1B/2N2N1Q/PPP3PP/2KR1B1R w - - 0 1",
    "3rr1k1/pp3pp1/1qn2np1/8/3p4/PP1R1P2/2P1NQPP/R1B3K1 b - - 0 1",
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
    "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
]
KIWIPETE = MIDDLEGAMES[8]


def sample_positions(count: int, seed: int = 0) -> list[chess.Board]:
    """``count`` positions from random games (varied material, both colours to move)."""
    rng = np.random.default_rng(seed)
    boards: list[chess.Board] = []
    while len(boards) < count:
        board = chess.Board()
        for _ in range(int(rng.integers(10, 120))):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(moves[int(rng.integers(len(moves)))])
            boards.append(board.copy(stack=False))
    return boards[:count]


def start_boards(kind: str, games: int) -> list[chess.Board]:
    """``games`` boards: all the start position (``start``) or the middlegames cycled (``middlegame``)."""
    if kind == "start":
        return [chess.Board() for _ in range(games)]
    return [chess.Board(MIDDLEGAMES[i % len(MIDDLEGAMES)]) for i in range(games)]
