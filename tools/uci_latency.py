"""How long a UCI engine takes to answer while it searches, and to its first move: the raw protocol, timed.

Starts ``alphazero uci --player SPEC`` (or ``--checkpoint PATH``, or any engine command with
``--command``) and measures, from the write of a command to the arrival of its answer:

* ``first_move``: ``uci``, ``isready``, then ``go movetime 100`` -> ``bestmove`` (plus the ``readyok``
  before it: where a fresh install compiles or loads its kernels);
* during ``go infinite``, after ``--think`` seconds: ``isready`` -> ``readyok`` and ``stop`` -> ``bestmove``;
* during ``go ponder wtime 2000 btime 2000``, after ``--think`` seconds: ``isready`` -> ``readyok`` and
  ``ponderhit`` -> ``bestmove`` (which then waits for the move's time, a few tens of milliseconds on a
  2 s clock).

Prints one JSON object, milliseconds. Every wait has a deadline (``--timeout``).

    .venv/bin/python tools/uci_latency.py --player ab:material --think 8
    .venv/bin/python tools/uci_latency.py --command /usr/games/stockfish --think 8
"""

from __future__ import annotations

import argparse
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class Engine:
    """An engine process and a reader thread stamping each line's arrival (monotonic seconds)."""

    def __init__(self, argv: list[str], timeout: float) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                     cwd=str(REPO))
        self.timeout = timeout
        self.lines: queue.Queue[tuple[float, str | None]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), line.strip()))
        self.lines.put((time.monotonic(), None))

    def send(self, line: str) -> float:
        """Write ``line``; returns when the write began (an answer can arrive before ``flush`` returns)."""
        assert self.proc.stdin is not None
        started = time.monotonic()
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return started

    def wait_for(self, prefix: str) -> float:
        """Arrival time of the next line starting with ``prefix`` (``TimeoutError`` past the deadline)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                arrived, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no {prefix!r} within {self.timeout} s") from None
            if line is None:
                raise RuntimeError(f"the engine exited before {prefix!r}")
            if line.startswith(prefix):
                return arrived

    def ms(self, command: str, reply: str) -> float:
        sent = self.send(command)
        return round((self.wait_for(reply) - sent) * 1000, 2)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
                self.proc.wait()


def measure(argv: list[str], think: float, timeout: float) -> dict[str, float]:
    engine = Engine(argv, timeout)
    figures: dict[str, float] = {}
    try:
        figures["uciok"] = engine.ms("uci", "uciok")
        figures["readyok"] = engine.ms("isready", "readyok")
        engine.send("position startpos")
        figures["first_move"] = engine.ms("go movetime 100", "bestmove")
        engine.send("go infinite")
        engine.wait_for("info")
        time.sleep(think)
        figures["isready_searching"] = engine.ms("isready", "readyok")
        figures["stop"] = engine.ms("stop", "bestmove")
        engine.send("position startpos moves e2e4")
        engine.send("go ponder wtime 2000 btime 2000")
        engine.wait_for("info")
        time.sleep(think)
        figures["isready_pondering"] = engine.ms("isready", "readyok")
        figures["ponderhit_2s_clock"] = engine.ms("ponderhit", "bestmove")
    finally:
        engine.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--player", metavar="SPEC")
    source.add_argument("--checkpoint", metavar="PATH")
    source.add_argument("--command", help="any UCI engine's command line (split on spaces)")
    parser.add_argument("--think", type=float, default=8.0, help="seconds of search before each probe")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds any one answer may take")
    args = parser.parse_args()
    if args.command:
        argv = args.command.split()
    else:
        argv = [sys.executable, "-m", "commands.main", "uci"]
        argv += ["--player", args.player] if args.player else ["--checkpoint", args.checkpoint]
    print(json.dumps({"engine": args.player or args.checkpoint or args.command, "think_s": args.think,
                      **measure(argv, args.think, args.timeout)}))


if __name__ == "__main__":
    main()
