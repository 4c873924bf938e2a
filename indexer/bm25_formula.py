"""BM25's constants and per-posting formulas, written once for the SQL scorer and the NumPy one.

The ranking is computed two ways (docs/design.md §4a): in SQL (query/bm25.py filling the statements
of query/sql.py; the merge's impact order, indexer/sql_maint.py, is the same expression), which is
the reference, and in NumPy over the postings sidecars (query/fastrank.py), which must return the
same floats. Equal floats need the same operations in the same order, so each formula here is one
Python function: NumPy calls it with arrays, and the SQL text is that same function called with
``SqlExpr`` operands, which write each operation down instead of computing it (parenthesized only
where the order of evaluation needs it). tests/system/test_fastrank.py evaluates both on the same inputs.

The constants travel as text: a statement holds ``str()`` of each float (``SQL_VALUES``, filled in
with ``str.format``), and NumPy uses the number DuckDB reads back from that text (``AS_WRITTEN``).
This module sits in the indexer (the merge needs the impact order) and imports nothing heavy: the
one-shot CLI's SQL path loads it without NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

# BM25's parameters (docs/design.md §2).
K1: Final = 1.2
B: Final = 0.75

# The placeholders of the SQL expressions below and what fills them (avgdl is the caller's).
SQL_VALUES: Final[dict[str, float]] = {"k1": K1, "b": B, "k1_plus_1": K1 + 1}
# The same numbers as a statement writes them and DuckDB reads them back: NumPy's operands.
AS_WRITTEN: Final[dict[str, float]] = {name: float(str(value)) for name, value in SQL_VALUES.items()}


def length_norm(tf: Any, dl: Any, avgdl: Any, k1: Any, b: Any) -> Any:
    """The denominator: tf plus k1 scaled by the chunk's length over the mean length."""
    return tf + k1 * (1 - b + b * dl / avgdl)


def impact(tf: Any, dl: Any, avgdl: Any, k1: Any, b: Any, *, numerator: Any = None) -> Any:
    """A posting's BM25 impact (its score before idf and the k1 + 1 factor): the order a merge sorts a
    term's postings in and a capped term's best postings are chosen by. ``numerator``: tf as the
    dividend when it is written differently (the SQL casts it to DOUBLE); the value is the same."""
    return (tf if numerator is None else numerator) / length_norm(tf, dl, avgdl, k1, b)


def weighted(weight: Any, tf: Any, dl: Any, avgdl: Any, k1: Any, k1_plus_1: Any, b: Any) -> Any:
    """A posting's BM25 term score: ``weight`` (the term's idf) times tf (k1 + 1) over the length norm.
    Chunk scores sum it over a chunk's postings; session scores over a session's summed tf."""
    return weight * tf * k1_plus_1 / length_norm(tf, dl, avgdl, k1, b)


# Binding strength of an SqlExpr: + and - bind less than * and /, an operand most.
_ADDITIVE = 1
_MULTIPLICATIVE = 2
_OPERAND = 3


@dataclass(frozen=True, slots=True)
class SqlExpr:
    """An SQL expression built by running a formula on it: each arithmetic operator writes itself.

    Operands are parenthesized where SQL would otherwise evaluate in another order: a left operand
    that binds less than the operator, a right operand that binds no more (SQL, like Python,
    evaluates ``a - b + c`` from the left, so ``a - (b + c)`` keeps its parentheses). Python numbers
    met on the way (the 1 in ``1 - b``) are written with ``str``."""

    text: str
    level: int = _OPERAND

    @staticmethod
    def _of(x: SqlExpr | float) -> SqlExpr:
        return x if isinstance(x, SqlExpr) else SqlExpr(str(x))

    @staticmethod
    def _apply(op: str, level: int, left: SqlExpr | float, right: SqlExpr | float) -> SqlExpr:
        a, b = SqlExpr._of(left), SqlExpr._of(right)
        lt = f"({a.text})" if a.level < level else a.text
        rt = f"({b.text})" if b.level <= level else b.text
        return SqlExpr(f"{lt} {op} {rt}", level)

    def __add__(self, other: SqlExpr | float) -> SqlExpr:
        return self._apply("+", _ADDITIVE, self, other)

    def __radd__(self, other: float) -> SqlExpr:
        return self._apply("+", _ADDITIVE, other, self)

    def __sub__(self, other: SqlExpr | float) -> SqlExpr:
        return self._apply("-", _ADDITIVE, self, other)

    def __rsub__(self, other: float) -> SqlExpr:
        return self._apply("-", _ADDITIVE, other, self)

    def __mul__(self, other: SqlExpr | float) -> SqlExpr:
        return self._apply("*", _MULTIPLICATIVE, self, other)

    def __rmul__(self, other: float) -> SqlExpr:
        return self._apply("*", _MULTIPLICATIVE, other, self)

    def __truediv__(self, other: SqlExpr | float) -> SqlExpr:
        return self._apply("/", _MULTIPLICATIVE, self, other)

    def __rtruediv__(self, other: float) -> SqlExpr:
        return self._apply("/", _MULTIPLICATIVE, other, self)


# A posting's impact over a segment's columns, with {k1}, {b} and {avgdl} left to str.format. The
# constants are decimal literals here, as the merge and the capped scans have always written them.
IMPACT_SQL: Final[str] = impact(SqlExpr("tf"), SqlExpr("dl"), SqlExpr("{avgdl}"), SqlExpr("{k1}"), SqlExpr("{b}"),
                                numerator=SqlExpr("tf::DOUBLE")).text


def weighted_sql(weight: str, tf: str, dl: str) -> str:
    """``weighted`` over the named SQL columns, with {k1}, {k1_plus_1}, {b} and {avgdl!r} left to
    str.format, each read as a DOUBLE."""
    expr = weighted(SqlExpr(weight), SqlExpr(tf), SqlExpr(dl), SqlExpr("{avgdl!r}::DOUBLE"),
                    SqlExpr("{k1}::DOUBLE"), SqlExpr("{k1_plus_1}::DOUBLE"), SqlExpr("{b}::DOUBLE"))
    text: str = expr.text
    return text
