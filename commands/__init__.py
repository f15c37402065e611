"""The ``alphazero`` command line: one module per subcommand, each a thin argparse layer.

Each module exposes ``add_parser(sub)``, which declares the subcommand's arguments and sets its
handler as ``func``, and that handler, which turns the parsed arguments into calls to ``alphazero.*``
(the core) or ``workers.*`` (Ray) and prints the result. ``commands.main`` assembles them. This
package sits above both: it may import either, and neither ever imports it.
"""
