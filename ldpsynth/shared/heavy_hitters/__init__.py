"""Heavy hitters over strings under LDP: an interactive prefix-extension protocol (docs/heavy-hitters.md).

:mod:`.encoding` turns strings into fixed-length codes, :mod:`.rounds` splits devices across rounds,
:mod:`.device` makes a device's report of its prefix fragment, :mod:`.server` decodes a round and
:mod:`.candidates` chooses the prefixes to extend, :mod:`.simulate` runs the whole protocol, :mod:`.collection`
makes it a collection whose rounds are ordinary sub-collections.
"""

from .collection import DiscoveryCard, DiscoverySchema, DiscoveryState
from .device import RoundSpec, report
from .encoding import StringEncoding
from .rounds import RoundSchedule, assign_rounds, round_of
from .server import HeavyHitters, HeavyHitterServer, RoundEstimate, decode_round
from .simulate import Simulation, simulate

__all__ = ["DiscoveryCard", "DiscoverySchema", "DiscoveryState",
           "HeavyHitterServer", "HeavyHitters", "RoundEstimate", "RoundSchedule", "RoundSpec", "Simulation",
           "StringEncoding", "assign_rounds", "decode_round", "report", "round_of", "simulate"]
