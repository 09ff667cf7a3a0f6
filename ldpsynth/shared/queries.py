"""Statistical queries (WYZ Def. 3, eqs. 9-10): the public names of the query modules.

One import for users; each part lives in its own module:

* :mod:`~ldpsynth.shared.query_model`: the query kinds, their conditions and normalisations;
* :mod:`~ldpsynth.shared.query_builders`: the builders (:func:`linear`, :func:`predicate`, ...);
* :mod:`~ldpsynth.shared.query_json`: the JSON form (documented there), parsing and serialisation;
* :mod:`~ldpsynth.shared.query_batch`: compiled batches (:class:`QueryBatch` and its blocks);
* :mod:`~ldpsynth.shared.query_compiler`: :func:`compile_queries`, checking queries against a schema;
* :mod:`~ldpsynth.shared.packed_batches`: :func:`linear_batch` and :func:`grouped_batch` from weight arrays.
"""

from . import packed_batches, query_batch, query_builders, query_compiler, query_json, query_model
from .packed_batches import *
from .query_batch import *
from .query_builders import *
from .query_compiler import *
from .query_json import *
from .query_model import *

#: Each module's ``__all__`` names its public part; this is their union.
__all__ = [*query_model.__all__, *query_builders.__all__, *query_json.__all__, *query_batch.__all__,
           *query_compiler.__all__, *packed_batches.__all__]
