"""The ``alphazero`` command: parses arguments, loads config, calls into the core or ``workers``.

Subcommands: ``train``, ``bench`` (more in the README). Errors the user can fix (a bad config key,
a missing or corrupt file, an illegal FEN) print one clear line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from alphazero.config import ConfigError, load_config
from alphazero.fileio import LockedError


def _add_config_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--config", required=required, help="YAML run config (configs/*.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one config value, e.g. --set search.num_simulations=64 (repeatable)")


def cmd_train(args: argparse.Namespace) -> int:
    from alphazero.checkpoint import RunDirectory

    if args.config is None:
        if not args.resume:
            raise ConfigError("--config is required for a new run")
        saved = RunDirectory(args.run_dir).config_path
        config = load_config(saved, args.overrides)
    else:
        config = load_config(args.config, args.overrides)
    from workers.driver import RunError, run_training

    try:
        state = run_training(config, args.run_dir, resume=args.resume, address=args.address,
                             oversubscribe=args.oversubscribe)
    except RunError as error:
        raise ConfigError(str(error)) from None
    print(json.dumps({"generation": state.generation, "best_generation": state.best_generation,
                      "games": state.games, "positions": state.positions, "learner_step": state.learner_step}))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from alphazero.bench import default_config_path, run_benchmarks

    config = load_config(args.config or default_config_path(), args.overrides)
    if args.selfplay:
        from workers.bench import selfplay_throughput

        counts = [int(n) for n in args.selfplay.split(",")]
        # Games take minutes each: a window much shorter than two minutes counts too few to mean anything.
        seconds = args.seconds if args.seconds is not None else 120.0
        rows = [selfplay_throughput(config, n, seconds=seconds) for n in counts]
        figures = {"network": f"{config.network.blocks}x{config.network.channels}",
                   "num_simulations": config.search.num_simulations, "runs": rows}
        if len(rows) > 1:
            figures["speedup"] = round(rows[-1]["positions_per_s"] / rows[0]["positions_per_s"], 2)
        print(json.dumps(figures) if args.json else json.dumps(figures, indent=1))
        return 0
    figures = run_benchmarks(config, seconds=args.seconds if args.seconds is not None else 3.0,
                             threads=args.threads, device=args.device)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:28s} {value}")
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    import torch

    from alphazero.learn.diagnose import diagnose

    torch.set_num_threads(args.threads)
    report = diagnose(args.run_dir, steps=args.steps, rounds=args.rounds, max_shards=args.max_shards)
    if args.json:
        print(json.dumps(report))
        return 0
    for key, value in report["data"].items():
        print(f"{key:28s} {value}")
    print("step  train_v  held_v  var(z)  train_p  held_p")
    for row in report["generalisation"]:
        print(f"{row['step']:5d}  {row['train_value_loss']:.4f}  {row['held_value_loss']:.4f}  {row['held_z_variance']:.4f}"
              f"  {row['train_policy_loss']:.3f}   {row['held_policy_loss']:.3f}")
    return 0


def cmd_uci(args: argparse.Namespace) -> int:
    if args.player is not None:
        from alphazero.judge.uci import run_uci_player

        return run_uci_player(args.player, device=args.device)
    from alphazero.judge.uci import run_uci

    return run_uci(args.checkpoint, device=args.device)


# ---- evaluation commands: arena, ratings, puzzles, play (implemented in alphazero.judge.evaluate) ----


def cmd_arena(args: argparse.Namespace) -> int:
    from alphazero.judge.evaluate import format_arena_report, parse_sprt, run_arena

    sprt = parse_sprt(args.sprt) if args.sprt else None
    runner = None
    if args.workers > 1:
        import functools

        from workers.arena import play_chunks_on_ray

        runner = functools.partial(play_chunks_on_ray, workers=args.workers)
    report = run_arena(args.player_a, args.player_b, args.games, openings_path=args.openings,
                       opening_plies=args.opening_plies, max_plies=args.max_plies, seed=args.seed, sprt=sprt,
                       pgn_path=args.pgn, progress=sys.stderr.isatty() and not args.json, chunk_runner=runner,
                       parallelism=args.workers)
    print(json.dumps(report) if args.json else format_arena_report(report))
    return 0


def cmd_ratings(args: argparse.Namespace) -> int:
    from alphazero.judge.evaluate import run_ratings

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    report = run_ratings(args.run_dir, anchors=args.anchor, games=args.games, sims=args.sims,
                         max_plies=args.max_plies, seed=args.seed, plot_path=args.plot, log=log)
    if args.json:
        print(json.dumps({key: value for key, value in report.items() if key != "table"}))
    else:
        print(report["table"])
        print(f"anchor {report['anchor']} = 0 Elo; {report['games']} games ({report['new_games']} new); plot {report['plot']}")
    return 0


def cmd_puzzles(args: argparse.Namespace) -> int:
    from alphazero.judge.evaluate import format_puzzle_report, run_puzzles

    report = run_puzzles(args.file, args.player, limit=args.limit, seed=args.seed)
    print(json.dumps(report) if args.json else format_puzzle_report(report))
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    import chess

    from alphazero.judge.evaluate import play_human

    play_human(args.checkpoint, chess.WHITE if args.color == "white" else chess.BLACK, sims=args.sims,
               pgn_path=args.pgn, unicode=args.unicode)
    return 0


def _add_evaluation_commands(sub: argparse._SubParsersAction) -> None:
    specs = ("players: mcts:PATH?sims=N&cpuct=C&algorithm=puct|gumbel | policy:PATH | random | greedy | "
             "uci:COMMAND?Option Name=value&nodes=N&movetime=MS&depth=D | ab:material?depth=D&movetime=MS&nodes=N "
             "(PATH: network file or run directory)")
    arena = sub.add_parser("arena", help="a match between two players: W/D/L, Elo with 95%% CI, LOS, SPRT, PGN",
                           description=specs)
    arena.add_argument("player_a", metavar="A", help="player spec (results are from A's side)")
    arena.add_argument("player_b", metavar="B", help="player spec")
    arena.add_argument("--games", type=int, required=True, help="number of games, even (each opening with both colours)")
    arena.add_argument("--openings", default=None, metavar="FILE", help="polyglot book (.bin) or EPD/FEN file (default: random first plies)")
    arena.add_argument("--opening-plies", type=int, default=None, help="book moves (default 8) or random plies (default 4) per opening")
    arena.add_argument("--max-plies", type=int, default=400, help="longer games are drawn, termination 'max length'")
    arena.add_argument("--pgn", default=None, metavar="OUT", help="write every game to this PGN file")
    arena.add_argument("--sprt", default=None, metavar="ELO0,ELO1", help="stop when an SPRT (alpha=beta=0.05) decides")
    arena.add_argument("--workers", type=int, default=1, help="K > 1: play game pairs as tasks on a private local Ray")
    arena.add_argument("--seed", type=int, default=0, help="openings and random players")
    arena.add_argument("--json", action="store_true", help="print one JSON object")
    arena.set_defaults(func=cmd_arena)

    ratings = sub.add_parser("ratings", help="Elo of every generation of a run (and anchors), maximum likelihood",
                             description=specs)
    ratings.add_argument("run_dir", help="run directory")
    ratings.add_argument("--anchor", action="append", default=[], metavar="SPEC",
                         help="anchor player, plays --games against the first, best and last generation (repeatable; the first is 0 Elo)")
    ratings.add_argument("--games", type=int, default=20, help="games per extra match")
    ratings.add_argument("--sims", type=int, default=None, help="simulations of the generations (default: the run's arena setting)")
    ratings.add_argument("--max-plies", type=int, default=400, help="longer games are drawn")
    ratings.add_argument("--plot", default=None, metavar="OUT.png", help="plot path (default RUN_DIR/ratings/elo.png)")
    ratings.add_argument("--seed", type=int, default=0)
    ratings.add_argument("--json", action="store_true", help="print one JSON object")
    ratings.set_defaults(func=cmd_ratings)

    puzzles = sub.add_parser("puzzles", help="share of only-move puzzles a player solves, 95%% Wilson interval",
                             description=specs)
    puzzles.add_argument("file", metavar="FILE.csv", help="CSV with header and columns fen,best_uci")
    puzzles.add_argument("--player", required=True, metavar="SPEC", help="player spec")
    puzzles.add_argument("--limit", type=int, default=None, help="only the first N puzzles")
    puzzles.add_argument("--seed", type=int, default=0)
    puzzles.add_argument("--json", action="store_true", help="print one JSON object")
    puzzles.set_defaults(func=cmd_puzzles)

    play = sub.add_parser("play", help="play a network in the terminal (moves in SAN or UCI on standard input)")
    play.add_argument("--checkpoint", required=True, help="network file, or run directory (its best network)")
    play.add_argument("--color", choices=["white", "black"], default="white", help="your colour")
    play.add_argument("--sims", type=int, default=100, help="the network's simulations per move")
    play.add_argument("--pgn", default=None, metavar="OUT", help="where the game is saved (default game-YYYYmmdd-HHMMSS.pgn)")
    play.add_argument("--unicode", action="store_true", help="draw pieces as unicode symbols")
    play.set_defaults(func=cmd_play)


# ---- end of evaluation commands ----


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="alphazero", description="AlphaZero-style chess: self-play, training, evaluation")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train by self-play on Ray (embedded local Ray, or --address to join a cluster)")
    _add_config_args(train, required=False)
    train.add_argument("--run-dir", required=True, help="run directory (checkpoints/NAME)")
    train.add_argument("--resume", action="store_true", help="continue the run in --run-dir")
    train.add_argument("--address", default=None, help="Ray cluster to join: 'auto' or HOST:PORT (default: start a local Ray)")
    train.add_argument("--oversubscribe", action="store_true",
                       help="run a config that asks for more CPUs than this machine has anyway (local Ray only; slower)")
    train.set_defaults(func=cmd_train)

    bench = sub.add_parser("bench", help="benchmark encoding, network and search (prints figures)")
    _add_config_args(bench, required=False)  # default: configs/default.yaml
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.add_argument("--seconds", type=float, default=None,
                       help="time per measurement (default 3; 120 per actor count with --selfplay)")
    bench.add_argument("--threads", type=int, default=1, help="torch threads")
    bench.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where the network runs")
    bench.add_argument("--selfplay", default="", metavar="N[,M...]",
                       help="instead: self-play throughput on a local Ray with N (then M...) actors for --seconds each")
    bench.set_defaults(func=cmd_bench)

    diag = sub.add_parser("diagnose", help="learning-health report of a run: value targets, held-out losses (slow)")
    diag.add_argument("run_dir", help="run directory")
    diag.add_argument("--steps", type=int, default=150, help="training steps per round")
    diag.add_argument("--rounds", type=int, default=6, help="rounds of training + held-out scoring")
    diag.add_argument("--max-shards", type=int, default=None, help="use only the newest N shards")
    diag.add_argument("--threads", type=int, default=1, help="torch threads")
    diag.add_argument("--json", action="store_true", help="print one JSON object")
    diag.set_defaults(func=cmd_diagnose)

    uci = sub.add_parser("uci", help="serve a network (or any player spec) as a UCI chess engine on stdin/stdout")
    served = uci.add_mutually_exclusive_group(required=True)
    served.add_argument("--checkpoint", help="network file, or run directory (its best network): tree search")
    served.add_argument("--player", metavar="SPEC",
                        help="any player spec, e.g. ab:material (alpha-beta with info lines), greedy, mcts:PATH")
    uci.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    uci.set_defaults(func=cmd_uci)

    _add_evaluation_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, ValueError, FileNotFoundError, LockedError) as error:
        print(f"alphazero {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
