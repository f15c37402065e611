"""The ``alphazero play`` command's work: a person plays a network, or any player spec, through text streams.

Owns the board drawing, the parsing of a typed move (SAN or UCI) with the reason an illegal one is
refused, and the game loop that saves the game as PGN (its path checked before the first move,
the file written atomically at the end). Reads no terminal directly: ``stdin`` and ``stdout`` are
any text streams. The opponent is a player of ``alphazero.judge.players``; how it searches is its own.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence, TextIO

import chess

from alphazero.board.game import game_pgn, result_string, terminal_status
from alphazero.errors import InputError
from alphazero.fileio import atomic_write_text, output_file

PIECE_NAMES = {chess.PAWN: "pawn", chess.KNIGHT: "knight", chess.BISHOP: "bishop", chess.ROOK: "rook",
               chess.QUEEN: "queen", chess.KING: "king"}
UCI_MOVE = re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?")


def draw_board(board: chess.Board, perspective: chess.Color = chess.WHITE, unicode: bool = False) -> str:
    """The board with rank and file labels, seen from ``perspective``'s side.

    ASCII: White's pieces upper case (``K Q R B N P``), Black's lower case, empty squares ``.``.
    """
    ranks = range(7, -1, -1) if perspective == chess.WHITE else range(8)
    files = range(8) if perspective == chess.WHITE else range(7, -1, -1)
    letters = "    " + " ".join(chess.FILE_NAMES[f] for f in files)
    border = "  +" + "-" * 17 + "+"
    lines = [letters, border]
    for rank in ranks:
        cells = []
        for file in files:
            piece = board.piece_at(chess.square(file, rank))
            cells.append("." if piece is None else (piece.unicode_symbol() if unicode else piece.symbol()))
        lines.append(f"{rank + 1} | {' '.join(cells)} | {rank + 1}")
    lines += [border, letters]
    return "\n".join(lines)


def _join_or(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _san_matches(board: chess.Board, text: str, moves: Iterable[chess.Move]) -> list[chess.Move]:
    """The moves among ``moves`` that the SAN pattern ``text`` could mean (piece, target, hints)."""
    match = chess.SAN_REGEX.match(text)
    if not match:
        return []
    piece = chess.PIECE_SYMBOLS.index(match.group(1).lower()) if match.group(1) else chess.PAWN
    target = chess.parse_square(match.group(4))
    promotion = match.group(5)
    found = []
    for move in moves:
        if move.to_square != target or board.piece_type_at(move.from_square) != piece:
            continue
        if match.group(2) and chess.square_file(move.from_square) != chess.FILE_NAMES.index(match.group(2)):
            continue
        if match.group(3) and chess.square_rank(move.from_square) != int(match.group(3)) - 1:
            continue
        if promotion and move.promotion != chess.PIECE_SYMBOLS.index(promotion[-1].lower()):
            continue
        found.append(move)
    return found


def _illegal_reason(board: chess.Board, move: chess.Move) -> str:
    """Why the well-formed ``move`` cannot be played here."""
    piece = board.piece_at(move.from_square)
    origin, target = chess.square_name(move.from_square), chess.square_name(move.to_square)
    if piece is None:
        return f"there is no piece on {origin}"
    if piece.color != board.turn:
        return f"the {PIECE_NAMES[piece.piece_type]} on {origin} is not yours"
    if piece.piece_type == chess.PAWN and chess.square_rank(move.to_square) in (0, 7) and move.promotion is None:
        if chess.Move(move.from_square, move.to_square, chess.QUEEN) in board.legal_moves:
            return f"say which piece the pawn becomes, e.g. {move.uci()}q"
    occupant = board.piece_at(move.to_square)
    if occupant is not None and occupant.color == board.turn and not board.is_castling(move):
        return f"{target} holds your own {PIECE_NAMES[occupant.piece_type]}"
    if board.is_pseudo_legal(move):
        return "you are in check and it does not get you out" if board.is_check() else "it would leave your king in check"
    return f"the {PIECE_NAMES[piece.piece_type]} on {origin} cannot move to {target}"


def parse_human_move(board: chess.Board, text: str) -> chess.Move:
    """A move typed in SAN (``Nf3``, ``exd5``, ``O-O``, ``e8=Q``) or UCI (``g1f3``, ``e7e8q``).

    Raises ``InputError`` with the reason when the move is not legal here, and lists the candidates
    of an ambiguous SAN ("ambiguous move Nd2: could be Nbd2 or Nfd2").
    """
    text = text.strip()
    if UCI_MOVE.fullmatch(text):
        move = chess.Move.from_uci(text)
        if move in board.legal_moves:
            return move
        raise InputError(f"illegal move {text}: {_illegal_reason(board, move)}")
    try:
        return board.parse_san(text)
    except chess.AmbiguousMoveError:
        candidates = sorted(board.san(move) for move in _san_matches(board, text, board.legal_moves))
        raise InputError(f"ambiguous move {text}: could be {_join_or(candidates)}") from None
    except chess.IllegalMoveError:
        if text.replace("0", "O").rstrip("+#") in ("O-O", "O-O-O"):
            raise InputError(f"illegal move {text}: castling that way is not possible now") from None
        pseudo = _san_matches(board, text, board.pseudo_legal_moves)
        if pseudo:
            raise InputError(f"illegal move {text}: {_illegal_reason(board, pseudo[0])}") from None
        match = chess.SAN_REGEX.match(text)
        piece = PIECE_NAMES[chess.PIECE_SYMBOLS.index(match.group(1).lower()) if match and match.group(1) else chess.PAWN]
        target = match.group(4) if match else "there"
        raise InputError(f"illegal move {text}: no {piece} of yours can move to {target}") from None
    except chess.InvalidMoveError:
        raise InputError(f"not a move: {text!r} (type SAN like Nf3 or UCI like g1f3; 'quit' or 'resign' to stop)") from None


HELP = "Type a move in SAN (Nf3, exd5, O-O, e8=Q) or UCI (g1f3, e7e8q); 'board' redraws, 'quit' or 'resign' ends."


def play_human(checkpoint: str | None = None, human_color: chess.Color = chess.WHITE, sims: int = 100,
               pgn_path: str | Path | None = None, unicode: bool = False, stdin: TextIO | None = None,
               stdout: TextIO | None = None, player: str | None = None) -> dict[str, Any]:
    """A person plays the network at ``checkpoint`` (``mcts`` with ``sims`` simulations), or the
    player ``player`` (any spec of ``alphazero.judge.players``: ``ab:material?movetime=500``,
    ``uci:...``, ``greedy``), through text streams.

    Reads one line per move from ``stdin`` (no terminal needed); an illegal or ambiguous move is
    asked again with the reason; ``quit``, ``resign`` or end of input stops. The game is saved as
    PGN at the end (``pgn_path``, default ``game-YYYYmmdd-HHMMSS.pgn`` in the current directory). A
    ``pgn_path`` that could not be written (a directory, a path under a file, a folder this process may
    not write to) is an ``InputError`` before the network is loaded or a move is asked for, as are
    ``sims < 1``, a missing network, a bad spec, and neither or both of ``checkpoint`` and ``player``.
    """
    from dataclasses import replace

    from alphazero.judge.players import PLAYER_SEARCH, MCTSPlayer, make_player, resolve_network_path
    from alphazero.nets.network import load_network

    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if (checkpoint is None) == (player is None):
        raise InputError("give exactly one of --checkpoint and --player")
    if sims < 1:
        raise InputError(f"--sims must be positive, got {sims}")
    pgn_path = output_file(pgn_path if pgn_path is not None else f"game-{time.strftime('%Y%m%d-%H%M%S')}.pgn", "--pgn")
    opponent: Any
    if player is not None:
        opponent = make_player(player)
        opponent_name = player.strip()
    else:
        assert checkpoint is not None
        network_path = resolve_network_path(checkpoint)
        opponent = MCTSPlayer(load_network(network_path), replace(PLAYER_SEARCH, num_simulations=sims),
                              name=f"alphazero ({network_path.name}, {sims} sims)")
        opponent_name = opponent.name
    board = chess.Board()
    human_name = "human"

    def say(text: str = "") -> None:
        print(text, file=stdout, flush=True)

    say(f"You play {'White' if human_color == chess.WHITE else 'Black'} against {opponent_name}. {HELP}")
    result, termination = "*", "abandoned"
    shown = -1  # ply count of the position last drawn: the board is redrawn only when it changed
    while True:
        status = terminal_status(board)
        if status is not None:
            value, termination = status
            white_value = value if board.turn == chess.WHITE else -value
            result = result_string(white_value)
            say(draw_board(board, human_color, unicode))
            say(f"Game over: {result} ({termination})")
            break
        if board.turn != human_color:
            move = opponent.choose_moves([board])[0]
            say(f"{opponent_name} plays {board.san(move)} ({move.uci()})")
            board.push(move)
            continue
        if shown != len(board.move_stack):
            say(draw_board(board, human_color, unicode))
            shown = len(board.move_stack)
        say(f"Move {board.fullmove_number}, you ({'White' if board.turn == chess.WHITE else 'Black'}) to move:")
        try:
            line = stdin.readline()
        except KeyboardInterrupt:
            line = ""
        if not line:
            say("End of input: game abandoned.")
            break
        text = line.strip()
        if not text:
            continue
        if text.lower() in ("quit", "exit"):
            say("Game abandoned.")
            break
        if text.lower() == "resign":
            result, termination = ("0-1", "resignation") if human_color == chess.WHITE else ("1-0", "resignation")
            say(f"You resign: {result}")
            break
        if text.lower() in ("help", "?"):
            say(HELP)
            continue
        if text.lower() == "board":
            shown = -1
            continue
        try:
            move = parse_human_move(board, text)
        except InputError as error:
            say(f"{error}; try again.")
            continue
        say(f"You play {board.san(move)} ({move.uci()})")
        board.push(move)
    white, black = (human_name, opponent_name) if human_color == chess.WHITE else (opponent_name, human_name)
    headers = {"Event": "alphazero play", "Site": "local", "Date": time.strftime("%Y.%m.%d"), "Round": "1",
               "White": white, "Black": black, "Result": result, "Termination": termination}
    atomic_write_text(pgn_path, game_pgn(board, headers) + "\n")
    opponent.close()
    say(f"Game saved to {pgn_path}")
    return {"result": result, "termination": termination, "plies": len(board.move_stack), "pgn": str(pgn_path)}
