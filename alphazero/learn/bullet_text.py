"""bullet's text data format: one position a line, ``FEN | score | result``.

Owns reading and writing that line (the format of bullet's ``bulletformat`` crate and of the engines that
train their NNUEs with it, e.g. Leorik): ``score`` is an integer in centipawns **from White's view**,
``result`` is the game's result **for White** written ``1.0`` (won), ``0.5`` (drawn) or ``0.0`` (lost).
Everything else in this project is from the side to move; the conversion happens here and nowhere else.

A mate score has no centipawn value; it is written as ``MATE_SCORE - N`` for "the side named wins with a
mate in N moves" (signed from White's view; Stockfish writes ``VALUE_MATE - ply`` the same way), so that it
fits bullet's 16-bit score. Reading, any ``|score| >= MATE_THRESHOLD`` is a mate (+-inf for training).

A file is of this format when its first non-empty line splits into three ``|``-separated fields (an EPD
or FEN line never holds a ``|``; ``looks_like_bullet``). Knows nothing of engines, features or torch.
"""

from __future__ import annotations

import math
import os

MATE_SCORE = 32000  # Stockfish's VALUE_MATE; the longest mate written is MATE_SCORE - MATE_THRESHOLD moves
MATE_THRESHOLD = 31000
RESULTS = {"1.0": 1.0, "0.5": 0.5, "0.0": 0.0, "1": 1.0, "0": 0.0}  # White's score as written -> as a number


def format_line(fen: str, white_cp: int | None, white_mate: int | None, white_result: float) -> str:
    """One line (with its newline). ``white_cp`` centipawns for White, or ``white_mate`` signed moves to mate
    (+N: White mates in N; -N: Black does); ``white_result`` White's score 1.0 / 0.5 / 0.0."""
    if white_mate is not None:
        moves = min(abs(white_mate), MATE_SCORE - MATE_THRESHOLD)
        score = (MATE_SCORE - moves) * (1 if white_mate > 0 else -1)
    elif white_cp is not None:
        score = max(-MATE_THRESHOLD + 1, min(MATE_THRESHOLD - 1, int(white_cp)))
    else:
        raise ValueError("a bullet line needs a score (centipawns or mate)")
    if white_result not in (0.0, 0.5, 1.0):
        raise ValueError(f"a bullet line's result is 1.0, 0.5 or 0.0, got {white_result!r}")
    return f"{fen} | {score} | {white_result:.1f}\n"


def parse_line(text: str) -> tuple[str, float, float]:
    """``(fen, score for White in centipawns (+-inf a mate), White's result 1 / 0.5 / 0)``; ``ValueError``
    saying what is wrong."""
    fields = [field.strip() for field in text.split("|")]
    if len(fields) != 3:
        shown = text.strip() if len(text) <= 80 else text[:77] + "..."
        raise ValueError(f"expected 'FEN | score | result', got {shown!r}")
    fen, score_text, result_text = fields
    try:
        score = int(score_text)
    except ValueError:
        raise ValueError(f"the score {score_text!r} is not an integer (centipawns, White's view)") from None
    if result_text not in RESULTS:
        raise ValueError(f"the result {result_text!r} is not 1.0, 0.5 or 0.0 (White's view)")
    white_cp = math.copysign(math.inf, score) if abs(score) >= MATE_THRESHOLD else float(score)
    return fen, white_cp, RESULTS[result_text]


def looks_like_bullet(path: str | os.PathLike) -> bool:
    """Whether the file's first non-empty line (of its first 64 KiB) has bullet's three fields."""
    with open(path, "rb") as handle:
        head = handle.read(65536)
    for raw in head.split(b"\n"):
        line = raw.strip()
        if line:
            return line.count(b"|") == 2
    return False
