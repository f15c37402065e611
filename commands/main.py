"""The ``alphazero`` command: builds the parser from one module per subcommand and runs the handler.

Errors the user can fix (``alphazero.errors.UserError``: a bad config key, a missing or corrupt
file, an illegal FEN, a locked run directory) print one line, ``alphazero CMD: error: MESSAGE``, and
exit with status 2. Any other exception is a bug: it propagates with its traceback.

SIGTERM (``kill``, ``docker stop``, systemd, Slurm at the end of a job) stops a command the way Ctrl-C
does: ``KeyboardInterrupt`` in the main thread, so a training run writes its state and a datagen or
ladder keeps what it has written; a second SIGTERM kills at once. Exit status 130 either way.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
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
    review,
    tournament,
    train,
    uci,
)

COMMANDS = (train, bench, diagnose, uci, arena, tournament, ladder, ratings, review, puzzles, play, label, datagen, pretrain, nnue, export)
"""The subcommands, in the order ``alphazero --help`` lists them; each has ``add_parser(sub)``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="alphazero", description="AlphaZero-style chess: self-play, training, evaluation")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C, once: the next SIGTERM gets the default action (the process ends)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main_thread else None
    try:
        return args.func(args)
    except UserError as error:
        message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        print(f"alphazero {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a command with no words of its own for it
        print(f"alphazero {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
