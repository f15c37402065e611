"""python-chess glue: terminal detection, results as values, games as PGN text, moves read from text.

Used inside search, so it avoids python-chess's slow calls (``outcome(claim_draw=True)`` walks the
whole move stack): draws are checked cheapest first and repetition only when the halfmove clock
allows one. Standard chess rules; a position that is over is never handed to the network.
"""

from __future__ import annotations

import io

import chess
import chess.pgn

# Draw reasons, and the words PGN 'Termination' headers use.
CHECKMATE = "checkmate"
STALEMATE = "stalemate"
INSUFFICIENT_MATERIAL = "insufficient material"
FIFTY_MOVES = "fifty moves"
THREEFOLD_REPETITION = "threefold repetition"
MAX_LENGTH = "max length"
RESIGNATION = "resignation"  # self-play: the side to move gave up a hopeless position
ADJUDICATED_WIN = "adjudication: win"  # the arena: both players' own scores agreed (judge.arena.Adjudication)
ADJUDICATED_DRAW = "adjudication: draw"
MATE_CP = 100_000  # a mate in a player's reported score (``last_scores``), as centipawns


def terminal_status(board: chess.Board, legal_moves: list[chess.Move] | None = None) -> tuple[float, str] | None:
    """``(value for the side to move, reason)`` when the game is over at ``board``, else ``None``.

    Checkmate is -1 for the side to move; stalemate, insufficient material, the fifty-move rule
    (halfmove clock >= 100, applied automatically as in self-play) and threefold repetition are 0.
    ``legal_moves`` may be passed when the caller has them already (saves ~30 us).
    """
    if legal_moves is None:
        has_moves = any(board.generate_legal_moves())
    else:
        has_moves = bool(legal_moves)
    if not has_moves:
        return (-1.0, CHECKMATE) if board.is_check() else (0.0, STALEMATE)
    if not (board.pawns | board.rooks | board.queens) and board.is_insufficient_material():
        return 0.0, INSUFFICIENT_MATERIAL
    clock = board.halfmove_clock
    if clock >= 100:
        return 0.0, FIFTY_MOVES
    # A position repeated three times needs at least eight reversible plies in between.
    if clock >= 8 and board.is_repetition(3):
        return 0.0, THREEFOLD_REPETITION
    return None


# A PGN result as the game's value for White; ``*`` (unfinished) is absent. ``result_string`` is the inverse.
RESULT_VALUES = {"1-0": 1.0, "0-1": -1.0, "1/2-1/2": 0.0}


def white_score(result: str) -> float:
    """White's score in a game with PGN ``result``: 1, 0.5 or 0 (an unfinished game counts as a draw)."""
    return (RESULT_VALUES.get(result, 0.0) + 1.0) / 2.0


def result_string(white_value: float) -> str:
    """A game value for White (+1, 0, -1) -> PGN result ``1-0``, ``1/2-1/2`` or ``0-1``."""
    if white_value > 0:
        return "1-0"
    if white_value < 0:
        return "0-1"
    return "1/2-1/2"


def legal_move(board: chess.Board, text: str, what: str = "move") -> chess.Move:
    """``text``, a move in UCI notation (``e2e4``, ``e7e8q``), as a legal move of ``board``; ``ValueError``
    naming ``what`` the text was (``best_uci``: a data file's best move) when it is not one. The one
    reader of a best move from a file: puzzles, labels, supervised and NNUE data."""
    try:
        move = chess.Move.from_uci(text.strip())
    except ValueError:
        move = chess.Move.null()
    if not move or move not in board.legal_moves:  # the null move (0000) is falsy
        raise ValueError(f"{what} {text!r} is not a legal move in {board.fen()}")
    return move


def game_pgn(board: chess.Board, headers: dict[str, str], start_fen: str | None = None) -> str:
    """The game on ``board`` (its move stack, played from ``start_fen``) as PGN text with ``headers``."""
    game = chess.pgn.Game()
    start = chess.Board(start_fen) if start_fen else chess.Board()
    if start_fen and start_fen != chess.STARTING_FEN:
        game.setup(start)
    node: chess.pgn.GameNode = game
    for move in board.move_stack:
        node = node.add_variation(move)
    for key, value in headers.items():
        game.headers[key] = value
    buffer = io.StringIO()
    print(game, file=buffer, end="")
    return buffer.getvalue()
