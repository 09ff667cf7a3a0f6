"""The queries DP-PQD decides on (DP-PQD §2.1): COUNT, SUM, MEDIAN (and quantiles) with a conjunctive WHERE.

.. code-block:: sql

    SELECT COUNT(*)  FROM t WHERE phi
    SELECT SUM(A)    FROM t WHERE phi
    SELECT MEDIAN(A) FROM t WHERE phi
    SELECT QUANTILE_CONT(A, 0.25) FROM t WHERE phi     -- the quantile generalisation of §6.2

``phi`` is a conjunction (``AND``) of conditions (:class:`SqlCondition`) on the table's columns:
``=``, ``<>``/``!=``, ``<``, ``<=``, ``>``, ``>=`` (numeric columns), ``IN (...)``, ``BETWEEN lo AND hi``
(inclusive) and ``LIKE 'text'`` without wildcards (DP-PQD's queries, Table 2, use LIKE as equality). Quote column names
that are not plain identifiers: ``"capital-gain"``. The SQL is parsed by sqlglot (DuckDB dialect);
anything outside this subset (OR, NOT, joins, GROUP BY, wildcards, ...) is rejected with a
:class:`~ldpsynth.shared.errors.ValidationError` naming the offending part.

The same query as JSON::

    {"aggregate": "sum", "attribute": "capital-gain",
     "where": [{"attribute": "sex", "op": "==", "value": "Male"},
               {"attribute": "age", "op": "between", "value": [30, 40]}]}

(``aggregate`` one of ``count``, ``sum``, ``median``, ``quantile``; ``quantile`` takes
``"q": 0.25``.) The MEDIAN of the selected tuples is the :math:`\\lceil n'/2 \\rceil`-th smallest
value (§6, :math:`n'` = number of selected tuples); the ``p``-quantile is the
:math:`\\lceil p n' \\rceil`-th smallest.

:meth:`Query.answer` evaluates a query on any :class:`~.table.Table` (weighted or not) with one
vectorised code path, used for the synthetic answer :math:`q(D_s)` and, in evaluation mode only,
for the truth :math:`q(D)`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ldpsynth.evaluation.pqd.table import Table
from ldpsynth.shared import jsonio
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_choice, check_probability, is_finite_real

AGGREGATES = ("count", "sum", "median", "quantile")
OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "in", "between")
_ORDER_OPS = ("<", "<=", ">", ">=", "between")
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _scalar(value: object, fld: str) -> str | float:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str):
        return value
    if is_finite_real(value):
        return float(value)
    raise ValidationError(fld, "a string or a finite number", f"got {value!r}")


@dataclass(frozen=True)
class SqlCondition:
    """``attribute op value``: one conjunct of the WHERE clause, compared with a table's column values.

    Not :class:`ldpsynth.shared.queries.Condition`, the predicate of mechanism E's query model,
    which compares the *codes* of a schema attribute.
    """

    attribute: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        if not isinstance(self.attribute, str) or not self.attribute:
            raise ValidationError("where.attribute", "a column name (non-empty string)", f"got {self.attribute!r}")
        check_choice(self.op, "where.op", OPERATORS)
        if self.op in ("in", "between"):
            if isinstance(self.value, (str, bytes, Mapping)) or not isinstance(self.value, Sequence) or not self.value:
                raise ValidationError("where.value", f"a non-empty list for {self.op!r}", f"got {self.value!r}")
            values = tuple(_scalar(v, "where.value") for v in self.value)
            if self.op == "between" and not (len(values) == 2 and isinstance(values[0], float)
                                             and isinstance(values[1], float) and values[0] <= values[1]):
                raise ValidationError("where.value", "[lo, hi] with numbers lo <= hi for 'between'",
                                      f"got {list(values)}")
            object.__setattr__(self, "value", values)
        else:
            value = _scalar(self.value, "where.value")
            if self.op in _ORDER_OPS and not isinstance(value, float):
                raise ValidationError("where.value", f"a number for {self.op!r}", f"got {value!r}")
            object.__setattr__(self, "value", value)

    def mask(self, table: Table) -> np.ndarray:
        """Boolean mask of the rows of ``table`` satisfying this condition (vectorised)."""
        col = table.column(self.attribute)
        numeric = col.dtype.kind in "iuf"
        if self.op in _ORDER_OPS and not numeric:
            raise ValidationError(f"where.{self.attribute}", f"a numeric column for {self.op!r}", "a text column")
        values = self.value if isinstance(self.value, tuple) else (self.value,)
        if self.op not in _ORDER_OPS and any(isinstance(v, float) != numeric for v in values):
            kind = "numbers" if numeric else "strings"
            raise ValidationError(f"where.{self.attribute}", f"{kind} (the column's type)", f"got {list(values)}")
        if self.op == "==":
            return col == self.value
        if self.op == "!=":
            return col != self.value
        if self.op == "in":
            return np.isin(col, np.array(values, dtype=col.dtype))
        if self.op == "between":
            return (col >= values[0]) & (col <= values[1])
        return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[self.op](col, self.value)

    def to_sql(self) -> str:
        name = f'"{self.attribute}"'

        def lit(v: str | float) -> str:
            if isinstance(v, str):
                return "'" + v.replace("'", "''") + "'"
            return repr(int(v)) if float(v).is_integer() else repr(v)

        if self.op == "in":
            return f"{name} IN ({', '.join(lit(v) for v in self.value)})"
        if self.op == "between":
            return f"{name} BETWEEN {lit(self.value[0])} AND {lit(self.value[1])}"
        op = {"==": "=", "!=": "<>"}.get(self.op, self.op)
        return f"{name} {op} {lit(self.value)}"

    def to_json(self) -> dict[str, Any]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"attribute": self.attribute, "op": self.op, "value": value}


@dataclass(frozen=True)
class Query:
    """A COUNT / SUM / MEDIAN / quantile query with a conjunctive WHERE (DP-PQD §2.1)."""

    aggregate: str
    attribute: str | None = None
    where: tuple[SqlCondition, ...] = ()
    q: float = 0.5

    def __post_init__(self) -> None:
        check_choice(self.aggregate, "aggregate", AGGREGATES)
        if self.aggregate == "count":
            if self.attribute is not None:
                raise ValidationError("attribute", "absent for COUNT(*)", f"got {self.attribute!r}")
        elif not isinstance(self.attribute, str) or not self.attribute:
            raise ValidationError("attribute", f"a column name for {self.aggregate.upper()}", f"got {self.attribute!r}")
        if self.aggregate == "median":
            object.__setattr__(self, "q", 0.5)
        object.__setattr__(self, "q", check_probability(self.q, "q"))
        where = tuple(self.where)
        for j, cond in enumerate(where):
            if not isinstance(cond, SqlCondition):
                raise ValidationError(f"where[{j}]", "a SqlCondition", f"got {type(cond).__name__}")
        object.__setattr__(self, "where", where)

    @property
    def is_quantile(self) -> bool:
        """MEDIAN or another quantile (§6)."""
        return self.aggregate in ("median", "quantile")

    def mask(self, table: Table) -> np.ndarray:
        """Rows satisfying the WHERE clause (all rows when it is empty)."""
        selected = np.ones(len(table), dtype=bool)
        for cond in self.where:
            selected &= cond.mask(table)
        return selected

    def values(self, table: Table) -> np.ndarray:
        """The aggregated attribute's column as float64 (it must be numeric)."""
        assert self.attribute is not None
        col = table.column(self.attribute)
        if col.dtype.kind not in "iuf":
            raise ValidationError(f"{table.name}.{self.attribute}", f"a numeric column for {self.aggregate.upper()}",
                                  "a text column")
        return col.astype(np.float64, copy=False)

    def answer(self, table: Table) -> float:
        """:math:`q(T)` on a (weighted) table; a quantile of an empty selection is an error."""
        selected = self.mask(table)
        weights = table.row_weights()[selected]
        if self.aggregate == "count":
            return float(weights.sum())
        values = self.values(table)[selected]
        if self.aggregate == "sum":
            return float(weights @ values)
        return weighted_quantile(values, weights, self.q, f"{table.name}: {self.to_sql()}")

    def to_sql(self) -> str:
        target = {"count": "COUNT(*)", "sum": f'SUM("{self.attribute}")', "median": f'MEDIAN("{self.attribute}")',
                  "quantile": f'QUANTILE_CONT("{self.attribute}", {self.q!r})'}[self.aggregate]
        where = f" WHERE {' AND '.join(c.to_sql() for c in self.where)}" if self.where else ""
        return f"SELECT {target} FROM t{where}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"aggregate": self.aggregate}
        if self.attribute is not None:
            out["attribute"] = self.attribute
        if self.aggregate == "quantile":
            out["q"] = self.q
        out["where"] = [c.to_json() for c in self.where]
        return out


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float, what: str) -> float:
    """The :math:`\\lceil q W \\rceil`-th smallest value, :math:`W` the total weight (DP-PQD §6).

    With unit weights this is the :math:`\\lceil q n' \\rceil`-th smallest of the selected values.
    Negative weights (a debiased histogram's cells) count as 0, and for non-integer total weight
    the target is :math:`qW` itself: a post-processing of the weighted table.
    """
    w = np.maximum(weights, 0.0)
    total = float(w.sum())
    if total <= 0.0:
        raise ValidationError("query", "a selection with positive total weight for a quantile",
                              f"{what} selects nothing")
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(w[order])
    target = math.ceil(q * total - 1e-9) if float(total).is_integer() else q * total
    index = int(np.searchsorted(cumulative, target - 1e-9 * max(1.0, total), side="left"))
    return float(values[order][min(index, len(order) - 1)])


# ----- SQL -------------------------------------------------------------------------------------
def _column_name(node: Any, where: str) -> str:
    from sqlglot import exp

    if not isinstance(node, exp.Column) or node.table:
        raise ValidationError(where, "a plain column name (quote names with '-': \"capital-gain\")",
                              f"got {node.sql() if node is not None else 'nothing'}")
    return node.name


def _literal(node: Any, where: str) -> str | float:
    from sqlglot import exp

    negative = isinstance(node, exp.Neg)
    inner = node.this if negative else node
    if not isinstance(inner, exp.Literal):
        raise ValidationError(where, "a literal number or 'string'", f"got {node.sql()}")
    if inner.is_string:
        if negative:
            raise ValidationError(where, "a literal number or 'string'", f"got {node.sql()}")
        return inner.this
    value = float(inner.this)
    return -value if negative else value


def _conditions(node: Any) -> list[SqlCondition]:
    """Flatten an AND tree into conditions; reject everything else."""
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _conditions(node.this)
    if isinstance(node, exp.And):
        return _conditions(node.this) + _conditions(node.expression)
    where = f"WHERE {node.sql()}"
    if isinstance(node, exp.Between):
        lo, hi = _literal(node.args["low"], where), _literal(node.args["high"], where)
        return [SqlCondition(_column_name(node.this, where), "between", [lo, hi])]
    if isinstance(node, exp.In):
        if node.args.get("query") is not None or not node.expressions:
            raise ValidationError(where, "IN with a list of literals", "a subquery or an empty list")
        return [SqlCondition(_column_name(node.this, where), "in", [_literal(e, where) for e in node.expressions])]
    if isinstance(node, exp.Like):
        pattern = _literal(node.expression, where)
        if not isinstance(pattern, str) or "%" in pattern or "_" in pattern:
            raise ValidationError(where, "LIKE 'text' without wildcards (% and _), i.e. equality", f"got {pattern!r}")
        return [SqlCondition(_column_name(node.this, where), "==", pattern)]
    ops = {exp.EQ: "==", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
    op = ops.get(type(node))
    if op is None:
        raise ValidationError(where, "a conjunction (AND) of =, <>, <, <=, >, >=, IN, BETWEEN, LIKE conditions",
                              f"unsupported {type(node).__name__.upper()}")
    left, right = node.this, node.expression
    if isinstance(left, exp.Column):
        return [SqlCondition(_column_name(left, where), op, _literal(right, where))]
    return [SqlCondition(_column_name(right, where), _MIRROR[op], _literal(left, where))]


def parse_sql(text: str) -> Query:
    """Parse the SQL subset of the module docstring (sqlglot, DuckDB dialect) into a :class:`Query`."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    if not isinstance(text, str) or not text.strip():
        raise ValidationError("query", "a SQL query SELECT COUNT(*)|SUM(A)|MEDIAN(A) FROM t [WHERE ...]", "empty")
    try:
        statements = sqlglot.parse(text, read="duckdb")
    except ParseError as exc:
        raise ValidationError("query", "valid SQL", str(exc).splitlines()[0]) from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Select):
        raise ValidationError("query", "exactly one SELECT statement", f"got {len(statements)} statements")
    select = statements[0]
    for key in ("joins", "group", "having", "order", "limit", "offset", "distinct", "with", "qualify", "windows"):
        if select.args.get(key):
            raise ValidationError("query", "SELECT <aggregate> FROM <table> [WHERE ...] only",
                                  f"unsupported {key.upper()}")
    tables = list(select.find_all(exp.Table))
    if len(tables) != 1 or not isinstance(tables[0].this, exp.Identifier):
        raise ValidationError("query.FROM", "one table name", f"got {len(tables)} tables")
    if len(select.expressions) != 1:
        raise ValidationError("query.SELECT", "exactly one aggregate", f"got {len(select.expressions)} expressions")
    target = select.expressions[0]
    if isinstance(target, exp.Alias):
        target = target.this
    where = select.args.get("where")
    conditions = tuple(_conditions(where.this)) if where is not None else ()
    legal = "COUNT(*), SUM(A), MEDIAN(A) or QUANTILE_CONT(A, q)"
    if isinstance(target, exp.Count):
        if not isinstance(target.this, exp.Star):
            raise ValidationError("query.SELECT", legal, f"got {target.sql()}")
        return Query("count", where=conditions)
    if isinstance(target, exp.Sum):
        return Query("sum", _column_name(target.this, "query.SELECT"), conditions)
    if isinstance(target, exp.Median):
        return Query("median", _column_name(target.this, "query.SELECT"), conditions)
    if isinstance(target, (exp.PercentileCont, exp.PercentileDisc, exp.Quantile)):
        level = target.args.get("expression") or target.args.get("quantile")
        if level is None:
            raise ValidationError("query.SELECT", "QUANTILE_CONT(A, q) with a literal q in (0, 1)",
                                  f"got {target.sql()}")
        q = _literal(level, "query.SELECT")
        if not isinstance(q, float):
            raise ValidationError("query.SELECT", "a numeric quantile level q in (0, 1)", f"got {q!r}")
        return Query("quantile", _column_name(target.this, "query.SELECT"), conditions, q)
    raise ValidationError("query.SELECT", legal, f"got {target.sql()}")


# ----- JSON ------------------------------------------------------------------------------------
def query_from_json(obj: object) -> Query:
    """A :class:`Query` from its JSON object (or text); unknown fields are errors."""
    if isinstance(obj, str):
        obj = jsonio.loads(obj, "query", "a JSON object")
    if not isinstance(obj, Mapping):
        raise ValidationError("query", "a JSON object", f"got {type(obj).__name__}")
    unknown = set(obj) - {"aggregate", "attribute", "where", "q"}
    if unknown:
        raise ValidationError("query", "fields aggregate, attribute, where, q", f"unknown {sorted(unknown)}")
    where = obj.get("where", [])
    if not isinstance(where, list):
        raise ValidationError("query.where", "a list of conditions", f"got {type(where).__name__}")
    conditions = []
    for j, cond in enumerate(where):
        if not isinstance(cond, Mapping) or set(cond) != {"attribute", "op", "value"}:
            raise ValidationError(f"query.where[{j}]", "an object with attribute, op, value", f"got {cond!r}")
        conditions.append(SqlCondition(cond["attribute"], cond["op"], cond["value"]))
    # The fields are checked by Query.__post_init__, with their names.
    return Query(cast(str, obj.get("aggregate")), obj.get("attribute"), tuple(conditions), obj.get("q", 0.5))


def parse_query(text: str) -> Query:
    """JSON (text starting with ``{``) or the SQL subset."""
    return query_from_json(text) if text.lstrip().startswith("{") else parse_sql(text)
