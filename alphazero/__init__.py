"""AlphaZero-style chess core: encoding, network, search, self-play, training, arena. Never imports ray."""

__version__ = "0.1.0"
