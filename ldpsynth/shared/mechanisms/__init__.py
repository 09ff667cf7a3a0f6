"""Large-domain frequency oracles: OUE, OLH, Hadamard response, subset selection (the math layer).

Each oracle is a pure protocol (:mod:`~ldpsynth.shared.mechanisms.pure`): exact samplers from the OS
CSPRNG (:mod:`~ldpsynth.shared.mechanisms.coins`), mergeable sufficient statistics and fast exact
decoding to support counts (:mod:`~ldpsynth.shared.mechanisms.oracle`), unbiased counts and the
closed-form variance of any batch of linear queries, and an exact privacy check on small domains
(:mod:`~ldpsynth.shared.mechanisms.exact`). Mechanism E is the same kind of protocol:
:meth:`PureProtocol.for_mechanism_e`.
"""

from .hadamard import HadamardResponse
from .olh import OLH
from .oracle import FrequencyOracle, OracleStatistics
from .oue import OUE
from .pure import PureProtocol
from .subset import SubsetSelection

__all__ = ["OLH", "OUE", "FrequencyOracle", "HadamardResponse", "OracleStatistics", "PureProtocol",
           "SubsetSelection"]
