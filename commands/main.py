"""The ``alphazero`` command: builds the parser from one module per subcommand and runs the handler.

Errors the user can fix (``alphazero.errors.UserError``: a bad config key, a missing or corrupt
file, an illegal FEN, a locked run directory) print one line, ``alphazero CMD: error: MESSAGE``, and
exit with status 2. Any other exception is a bug: it propagates with its traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from alphazero.errors import UserError
from commands import (
    arena,
    bench,
    datagen,
    diagnose,
    export,
    label,
    ladder,
    nnue,
    play,
    pretrain,
    puzzles,
    ratings,
    tournament,
    train,
    uci,
)

COMMANDS = (train, bench, diagnose, uci, arena, tournament, ladder, ratings, puzzles, play, label, datagen, pretrain, nnue, export)
"""The subcommands, in the order ``alphazero --help`` lists them; each has ``add_parser(sub)``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="alphazero", description="AlphaZero-style chess: self-play, training, evaluation")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UserError as error:
        message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        print(f"alphazero {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
