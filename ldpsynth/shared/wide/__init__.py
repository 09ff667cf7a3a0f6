"""Wide rows: devices partitioned across low-dimensional views, each reporting its view's cell with the full
ε, and one model of all attributes fitted to the noisy views (docs/wide.md).

* :mod:`.views`: the views (marginals) of a wide row and a row's cell in each;
* :mod:`.assignment`: a device's view from its key (HMAC-SHA256, exactly uniform);
* :mod:`.measure`: the best oracle per view, its unbiased shares and their exact variances;
* :mod:`.consistency`: Norm-Sub;
* :mod:`.answers`: marginals inside measured views, combined across views, with analytic standard errors;
* :mod:`.selection`: which views to measure, from a pilot (by key) or a prior: a Chow-Liu forest of pairs;
* :mod:`.model`: Private-PGM fitted to the views (the optional ``[wide]`` extra);
* :mod:`.collection`: a wide collection (a ``"views"`` block) expanded into one ordinary collection per view, its card.
* :mod:`.database`: the query kinds answered over attribute names and values, analytically inside a view, from
  the model (bootstrap errors) elsewhere; synthetic rows.
* :mod:`.parent`, :mod:`.grouped`, :mod:`.guarantees`, :mod:`.release`: a wide collection's parent answered from its
  views' sub-collections (grouped queries per public group; the guarantees, the worst over the views read) and its
  export.
"""

from .answers import Answer, analytic_marginal
from .assignment import assign_view, assign_views
from .collection import WideCard, WideSchema
from .consistency import norm_sub
from .database import WideAnswer, WideDatabase
from .measure import ViewMeasurement, best_mechanism, device_report, measure, simulate
from .views import View, WideDomain, pairs, project

__all__ = ["Answer", "View", "ViewMeasurement", "WideAnswer", "WideCard", "WideDatabase", "WideDomain", "WideSchema",
           "analytic_marginal",
           "assign_view", "assign_views", "best_mechanism", "device_report", "measure", "norm_sub", "pairs", "project",
           "simulate"]
