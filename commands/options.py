"""Arguments and help text shared by several subcommands."""

from __future__ import annotations

import argparse

PLAYER_SPECS = ("players: mcts:PATH?sims=N&cpuct=C&algorithm=puct|gumbel | policy:PATH | random | greedy | "
                "uci:COMMAND?Option Name=value&nodes=N&movetime=MS&depth=D | ab:material|NNUE?depth=D&movetime=MS&nodes=N"
                "&hash=MB&share=S&TECHNIQUE=0|1 (PATH: network file or run directory; NNUE: a file `alphazero nnue train` "
                "wrote; S: the part of movetime after which no iteration starts, default 1; TECHNIQUE: nullmove, lmr, checkext, rfp, futility, lmp, qsee, improving, seeorder, histmalus, iir, "
                "nmpdepth, conthist, qtt, corrhist, singular, histlmr, probcut)")
"""The player spec grammar, the description of every command that takes player specs."""


def add_config_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """``--config FILE`` and the repeatable ``--set SECTION.KEY=VALUE``."""
    parser.add_argument("--config", required=required, help="YAML run config (configs/*.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one config value, e.g. --set search.num_simulations=64 (repeatable)")
