"""Schema: per-type column encoding, the mixed-radix private domain and public keys, JSON, errors.

Deterministic except for hypothesis' example generation (property tests; no statistical tests).
"""

from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import ldpsynth.shared.attributes as schema_module  # the schema's doctest (bits_for_rows) moved with it
from ldpsynth.shared.errors import SchemaError, ValidationError
from ldpsynth.shared.schema import (
    MAX_BATCH_WEIGHTS,
    MAX_BITS,
    BinaryAttribute,
    CategoricalAttribute,
    ContinuousAttribute,
    IntegerAttribute,
    Schema,
    bits_for_rows,
)

from .documents import DROP, replace_fields

PROPERTY = settings(max_examples=150, deadline=None)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

RATINGS = {"name": "ratings", "epsilon": 1.0, "attributes": [
    {"name": "movie", "type": "integer", "min": 1, "max": 1682, "public": True},
    {"name": "rating", "type": "integer", "min": 1, "max": 5}]}


def schema_with(*attributes, epsilon=1.0) -> Schema:
    return Schema("test", epsilon, tuple(attributes))


# ----- per-type round trips ------------------------------------------------------------------------

# numpy's fixed-width unicode arrays drop trailing NUL characters, so "\x00" is left out.
LABELS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)


@PROPERTY
@given(data=st.data(), values=st.lists(LABELS, min_size=2, max_size=12, unique=True))
def test_categorical_column_round_trip(data, values):
    attr = CategoricalAttribute("c", False, tuple(values))
    column = data.draw(st.lists(st.sampled_from(values), max_size=50))
    codes = attr.encode(column)
    assert codes.dtype == np.int64
    assert codes.tolist() == [values.index(v) for v in column]
    assert attr.decode(codes).tolist() == column


def test_binary_accepts_numbers_bools_and_words():
    attr = BinaryAttribute("b")
    assert attr.encode([0, 1, 1, 0]).tolist() == [0, 1, 1, 0]
    assert attr.encode([True, False]).tolist() == [1, 0]
    assert attr.encode(np.array([0.0, 1.0])).tolist() == [0, 1]
    words = ["true", "false", "True", "False", "TRUE", "FALSE", " yes ", "no", "1", "0"]
    assert attr.encode(words).tolist() == [1, 0, 1, 0, 1, 0, 1, 0, 1, 0]
    assert attr.encode(np.array([True, "false", 1], dtype=object)).tolist() == [1, 0, 1]
    assert attr.decode(attr.encode(["true", "false"])).tolist() == [1, 0]


@PROPERTY
@given(column=st.lists(st.sampled_from([0, 1]), max_size=50))
def test_binary_column_round_trip(column):
    attr = BinaryAttribute("b")
    assert attr.decode(attr.encode(column)).tolist() == column
    assert attr.encode([bool(v) for v in column]).tolist() == column
    assert attr.encode(["true" if v else "false" for v in column]).tolist() == column


@st.composite
def integer_attributes(draw):
    low = draw(st.one_of(st.integers(-1000, 1000), st.integers(INT64_MIN, INT64_MAX - 1)))
    top = min(2**62 - 1, INT64_MAX - low)  # max = low + span must stay an int64
    span = draw(st.one_of(st.integers(1, min(100, top)), st.integers(1, top)))
    return IntegerAttribute("i", False, low, low + span)


@PROPERTY
@given(data=st.data(), attr=integer_attributes())
def test_integer_column_round_trip(data, attr):
    """Codes are value - min for int64 arrays, Python ints and decimal strings alike: exact beyond 2^53."""
    column = data.draw(st.lists(st.integers(attr.min, attr.max), max_size=30) | st.just([attr.min, attr.max]))
    expected = [v - attr.min for v in column]
    assert attr.encode(np.array(column, dtype=np.int64)).tolist() == expected
    assert attr.encode([str(v) for v in column]).tolist() == expected
    assert attr.encode(np.array(column, dtype=object)).tolist() == expected
    assert attr.decode(attr.encode(column)).tolist() == column
    if -(2**53) <= attr.min and attr.max <= 2**53:
        assert attr.encode(np.array(column, dtype=np.float64)).tolist() == expected


def test_integer_encoding_is_exact_for_big_values():
    """Above 2^53 a float64 detour would round: '2^62 - 1' must not become the out-of-domain code 2^62."""
    attr = IntegerAttribute("big", False, 0, 2**62 - 1)
    assert attr.encode(["4611686018427387903", "9007199254740993"]).tolist() == [2**62 - 1, 2**53 + 1]
    for bad in (["4611686018427387904"], [2.0**62], np.array([2**63], dtype=np.uint64)):
        with pytest.raises(ValidationError):
            attr.encode(bad)


def test_integer_uint64_does_not_wrap_into_the_range():
    attr = IntegerAttribute("i", False, -10, 10)
    with pytest.raises(ValidationError) as info:
        attr.encode(np.array([3, 2**64 - 5], dtype=np.uint64))
    assert info.value.position == 1
    assert attr.encode(np.array([0, 10], dtype=np.uint8)).tolist() == [10, 20]


@st.composite
def continuous_attributes(draw):
    lo = draw(st.floats(-1e9, 1e9))
    span = draw(st.floats(1e-6, 1e9))
    bits = draw(st.integers(1, MAX_BITS))
    try:
        return ContinuousAttribute("x", False, lo, lo + span, bits)
    except SchemaError:  # buckets narrower than the float resolution are refused (tested below)
        assume(False)


def ulp_tolerance(attr: ContinuousAttribute) -> float:
    """Float rounding allowance: 4 ulps of the largest magnitude involved."""
    return 4 * math.ulp(max(abs(attr.lo), abs(attr.hi), attr.hi - attr.lo))


@PROPERTY
@given(data=st.data(), attr=continuous_attributes())
def test_continuous_lower_edge_decoding(data, attr):
    """x̂ = lo + code * width is the lower edge of x's bucket: x̂ <= x and x - x̂ <= width (WYZ §V-A),
    up to 4 float ulps; ``lo`` gives code 0 and ``hi`` the last code."""
    column = data.draw(st.lists(st.floats(attr.lo, attr.hi), max_size=40)) + [attr.lo, attr.hi]
    x = np.asarray(column)
    codes = attr.encode(x)
    assert codes.min() >= 0 and codes.max() < attr.size
    assert codes[-2] == 0 and codes[-1] == attr.size - 1
    x_hat = attr.decode(codes)
    assert np.array_equal(x_hat, attr.lo + codes * attr.width)
    assert (x_hat <= x).all()
    assert (x - x_hat <= attr.width + ulp_tolerance(attr)).all()


@PROPERTY
@given(data=st.data(), attr=continuous_attributes())
def test_continuous_decoded_edges_encode_back_to_their_code(data, attr):
    """encode(decode(c)) == c: an export of decoded values re-encodes to the same synthetic rows."""
    codes = np.arange(attr.size) if attr.size <= 4096 else np.asarray(
        data.draw(st.lists(st.integers(0, attr.size - 1), min_size=1, max_size=200)))
    assert np.array_equal(attr.encode(attr.decode(codes)), codes)


def test_continuous_example():
    attr = ContinuousAttribute("x", False, 0.0, 10.0, 2)  # buckets of width 2.5
    assert attr.encode([0.0, 2.4, 2.5, 9.99, 10.0, "7.5"]).tolist() == [0, 0, 1, 3, 3, 3]
    assert attr.decode([0, 1, 2, 3]).tolist() == [0.0, 2.5, 5.0, 7.5]
    known_bad_edges = ContinuousAttribute("y", False, 0.1, 0.3, 8)  # float division lands below edges here
    assert np.array_equal(known_bad_edges.encode(known_bad_edges.decode(np.arange(256))), np.arange(256))


# ----- bits_for_rows -------------------------------------------------------------------------------


def test_bits_for_rows_follows_2_to_the_2k_equals_sqrt_n():
    """WYZ §V-A: 2^(2k) = sqrt(n), i.e. k = log2(n)/4 (at least 1, at most MAX_BITS)."""
    for k in range(1, MAX_BITS + 1):
        n = 2 ** (4 * k)
        assert bits_for_rows(n) == k and 2 ** (2 * k) == math.isqrt(n)
    assert bits_for_rows(65536) == 4
    assert bits_for_rows(1) == 1 and bits_for_rows(10) == 1
    assert bits_for_rows(2**200) == MAX_BITS


@given(n=st.integers(1, 2**96))
def test_bits_for_rows_is_the_nearest_integer(n):
    k = bits_for_rows(n)
    if 1 < k < MAX_BITS:
        assert abs(k - math.log2(n) / 4) <= 0.5


@pytest.mark.parametrize("n", [0, -5, 1.5, 100.0, "100", True, None])
def test_bits_for_rows_rejects_bad_n(n):
    with pytest.raises(ValidationError) as info:
        bits_for_rows(n)
    assert info.value.field == "n" and "an integer >= 1" in str(info.value)


# ----- mixed radix ---------------------------------------------------------------------------------

MIXED = Schema("mixed", 0.5, (
    CategoricalAttribute("genre", True, ("drama", "comedy", "horror", "docu")),
    CategoricalAttribute("colour", False, ("red", "green", "blue")),
    IntegerAttribute("movie", True, 1, 1682),
    BinaryAttribute("smoker", False),
    IntegerAttribute("rating", False, 1, 5),
    ContinuousAttribute("income", False, 0.0, 100.0, 3),
))


@st.composite
def mixed_rows(draw):
    n = draw(st.integers(0, 40))
    return {
        "genre": draw(st.lists(st.sampled_from(["drama", "comedy", "horror", "docu"]), min_size=n, max_size=n)),
        "colour": draw(st.lists(st.sampled_from(["red", "green", "blue"]), min_size=n, max_size=n)),
        "movie": draw(st.lists(st.integers(1, 1682), min_size=n, max_size=n)),
        "smoker": draw(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n)),
        "rating": draw(st.lists(st.integers(1, 5), min_size=n, max_size=n)),
        "income": draw(st.lists(st.floats(0.0, 100.0), min_size=n, max_size=n)),
    }


def test_mixed_schema_views():
    assert [a.name for a in MIXED.private_attributes] == ["colour", "smoker", "rating", "income"]
    assert [a.name for a in MIXED.public_attributes] == ["genre", "movie"]
    assert MIXED.private_domain_size == 3 * 2 * 5 * 8 and MIXED.public_domain_size == 4 * 1682


@PROPERTY
@given(rows=mixed_rows())
def test_private_mixed_radix_round_trip(rows):
    """code = ravel_multi_index(digits, sizes) (C order, first private attribute most significant)."""
    private = MIXED.private_attributes
    digits = {a.name: a.encode(rows[a.name]) for a in private}
    codes = MIXED.encode_private(rows)
    expected = np.ravel_multi_index(tuple(digits[a.name] for a in private), tuple(a.size for a in private))
    assert np.array_equal(codes, expected)
    back = MIXED.private_digits(codes)
    assert list(back) == [a.name for a in private]
    assert all(np.array_equal(back[name], digits[name]) for name in digits)
    decoded = MIXED.decode_private(codes)
    assert decoded["colour"].tolist() == rows["colour"] and decoded["rating"].tolist() == rows["rating"]
    assert decoded["smoker"].tolist() == rows["smoker"]
    assert np.array_equal(decoded["income"], MIXED.attribute("income").decode(digits["income"]))


@PROPERTY
@given(rows=mixed_rows())
def test_public_key_round_trip(rows):
    public = MIXED.public_attributes
    keys = MIXED.encode_public(rows)
    expected = np.ravel_multi_index(tuple(a.encode(rows[a.name]) for a in public), tuple(a.size for a in public))
    assert np.array_equal(keys, expected)
    decoded = MIXED.decode_public(keys)
    assert decoded["genre"].tolist() == rows["genre"] and decoded["movie"].tolist() == rows["movie"]


@PROPERTY
@given(data=st.data(), sizes=st.lists(st.integers(2, 300), min_size=1, max_size=6))
def test_mixed_radix_matches_numpy_for_any_sizes(data, sizes):
    # Private domains over MAX_BATCH_WEIGHTS are refused; larger ones are tested as public keys (same radix code).
    public = math.prod(sizes) > MAX_BATCH_WEIGHTS
    attributes = tuple(IntegerAttribute(f"a{j}", public, 0, s - 1) for j, s in enumerate(sizes))
    schema = Schema("s", 1.0, attributes + ((BinaryAttribute("private"),) if public else ()))
    n = data.draw(st.integers(1, 20))
    columns = {f"a{j}": data.draw(st.lists(st.integers(0, s - 1), min_size=n, max_size=n)) for j, s in enumerate(sizes)}
    codes = schema.encode_public(columns) if public else schema.encode_private(columns)
    assert np.array_equal(codes, np.ravel_multi_index(tuple(columns.values()), tuple(sizes)))
    assert (schema.public_domain_size if public else schema.private_domain_size) == math.prod(sizes)
    digits = schema.public_digits(codes) if public else schema.private_digits(codes)
    assert all(np.array_equal(digits[k], v) for k, v in columns.items())
    if public:  # the fold of checked codes (admission) is the same radix
        stacked = np.column_stack([np.asarray(v, np.int64) for v in columns.values()])
        assert np.array_equal(schema.fold_public_codes(stacked), codes)


def test_first_attribute_is_most_significant():
    schema = schema_with(IntegerAttribute("hi", False, 0, 2), IntegerAttribute("lo", False, 0, 9))
    assert schema.encode_private({"hi": [0, 1, 2], "lo": [0, 0, 7]}).tolist() == [0, 10, 27]


def test_no_public_attributes_gives_zero_keys():
    schema = schema_with(BinaryAttribute("b"))
    assert schema.public_domain_size == 1
    assert schema.encode_public({"b": [0, 1, 1]}).tolist() == [0, 0, 0]
    assert schema.fold_public_codes(np.zeros((3, 0), np.int64)).tolist() == [0, 0, 0]


def test_column_errors():
    with pytest.raises(ValidationError) as info:
        MIXED.encode_private({"colour": ["red"], "smoker": [1], "rating": [3]})
    assert info.value.field == "income" and "missing column" in str(info.value)
    with pytest.raises(ValidationError) as info:
        MIXED.encode_private({"colour": ["red"], "smoker": [1, 0], "rating": [3], "income": [1.0]})
    assert info.value.field == "smoker" and "a column of 1 rows" in str(info.value)
    with pytest.raises(ValidationError) as info:
        MIXED.attribute("nope")
    assert info.value.field == "attribute"


@pytest.mark.parametrize("codes, position", [([0, 240], 1), ([-1], 0), ([0.0], None), ([True], None)])
def test_private_codes_are_checked(codes, position):
    with pytest.raises(ValidationError) as info:
        MIXED.private_digits(codes)
    assert info.value.field == "private_code" and "[0, 239]" in info.value.legal
    assert info.value.position == position


@pytest.mark.parametrize("keys, position", [([0, 6728], 1), ([-1], 0), ([1.7], None)])
def test_public_keys_are_checked(keys, position):
    with pytest.raises(ValidationError) as info:
        MIXED.public_digits(keys)
    assert info.value.field == "public_key" and "[0, 6727]" in info.value.legal
    assert info.value.position == position


# ----- JSON ------------------------------------------------------------------------------------------


def test_from_json_ratings_example():
    schema = Schema.from_json(json.dumps(RATINGS))
    assert schema.name == "ratings" and schema.epsilon == 1.0
    assert schema.attribute("movie") == IntegerAttribute("movie", True, 1, 1682)
    assert schema.attribute("rating") == IntegerAttribute("rating", False, 1, 5)
    assert schema.private_domain_size == 5 and schema.public_domain_size == 1682
    rows = {"movie": [1, 1682, 50], "rating": [1, 5, 3]}
    assert schema.encode_private(rows).tolist() == [0, 4, 2]
    assert schema.encode_public(rows).tolist() == [0, 1681, 49]
    assert Schema.from_json(RATINGS) == schema


@st.composite
def attribute_json(draw, name):
    kind = draw(st.sampled_from(["categorical", "binary", "integer", "continuous"]))
    obj = {"name": name, "type": kind, "public": draw(st.booleans())}
    if kind == "categorical":
        obj["values"] = draw(st.lists(LABELS, min_size=2, max_size=6, unique=True))
    elif kind == "integer":
        lo = draw(st.integers(-(10**6), 10**6))
        obj.update(min=lo, max=lo + draw(st.integers(1, 10**4)))
    elif kind == "continuous":
        lo = draw(st.floats(-1e3, 1e3))
        obj.update(lo=lo, hi=lo + draw(st.floats(1.0, 1e3)), bits=draw(st.integers(1, 13)))
    return obj  # every attribute has < 2^14 values, so up to 4 of them stay below the 2^62 domain cap


@st.composite
def schema_json(draw):
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=4, unique=True))
    attrs = [draw(attribute_json(name)) for name in names]
    attrs[draw(st.integers(0, len(attrs) - 1))]["public"] = False
    private = 1
    for attr in attrs:  # a private domain over MAX_BATCH_WEIGHTS is refused (tested above): make the rest public
        if not attr["public"]:
            size = Schema.from_json({"name": "one", "epsilon": 1.0, "attributes": [attr]}).private_domain_size
            attr["public"] = private * size > MAX_BATCH_WEIGHTS
            private *= 1 if attr["public"] else size
    return {"name": draw(st.text(min_size=1, max_size=20)), "epsilon": draw(st.floats(1e-3, 20.0)),
            "attributes": attrs}


@PROPERTY
@given(doc=schema_json())
def test_json_round_trip(doc):
    schema = Schema.from_json(doc)
    assert Schema.from_json(schema.to_json()) == schema
    assert Schema.from_json(schema.dumps()) == schema
    assert json.loads(schema.dumps()) == json.loads(json.dumps(schema.to_json()))


def test_load(tmp_path):
    path = tmp_path / "ratings.json"
    path.write_text(json.dumps(RATINGS), encoding="utf-8")
    assert Schema.load(path) == Schema.from_json(RATINGS)


def _with(attribute_changes: dict | None = None, drop: tuple = (), **top) -> dict:
    """RATINGS with the *rating* attribute changed / stripped of fields, and top-level fields replaced."""
    doc = json.loads(json.dumps(RATINGS))
    rating = doc["attributes"][1]
    rating.update(attribute_changes or {})
    for key in drop:
        rating.pop(key)
    return replace_fields(doc, top)


BIG = {"type": "integer", "min": 0, "max": 2**40}
BAD_SCHEMAS = [
    # (document, field named, legal range named)
    pytest.param(_with({"type": "float"}), "attributes[rating].type", "one of categorical, binary, integer, continuous",
                 id="unknown-type"),
    pytest.param(_with({"type": ["integer"]}), "attributes[rating].type", "one of categorical", id="type-not-a-string"),
    pytest.param(_with(drop=("type",)), "attributes[rating].type", "one of categorical", id="missing-type"),
    pytest.param(_with({"name": "movie"}), "attributes", "distinct attribute names", id="duplicate-names"),
    pytest.param(_with({"min": 5, "max": 5}), "attributes[rating]", "min < max", id="min-equals-max"),
    pytest.param(_with({"min": 6, "max": 5}), "attributes[rating]", "min < max", id="min-above-max"),
    pytest.param(_with({"min": 1.5}), "attributes[rating].min", "an integer", id="min-not-integer"),
    pytest.param(_with({"max": True}), "attributes[rating].max", "an integer", id="max-bool"),
    pytest.param(_with({"max": 2**64}), "attributes[rating].max", "[-2^63, 2^63 - 1]", id="max-beyond-int64"),
    pytest.param(_with({"min": 0, "max": 2**62}), "attributes[rating]", "at most 4611686018427387904 values",
                 id="integer-range-too-large"),
    pytest.param(_with(drop=("max",)), "attributes[rating]", "the fields ['max', 'min']", id="missing-max"),
    pytest.param(_with(drop=("name",)), "attributes[1].name", "a non-empty identifier", id="missing-name"),
    pytest.param(_with({"name": "two words"}), "attributes[1].name", "a non-empty identifier", id="bad-name"),
    pytest.param(_with({"unit": "stars"}), "attributes[rating]", "fields name, type, public, max, min",
                 id="unknown-attribute-field"),
    pytest.param(_with({"public": "no"}), "attributes[rating].public", "true or false", id="public-not-bool"),
    pytest.param(_with({"type": "continuous", "lo": 2.0, "hi": 1.0}, drop=("min", "max")), "attributes[rating]",
                 "lo < hi", id="lo-above-hi"),
    pytest.param(_with({"type": "continuous", "lo": -1e308, "hi": 1e308}, drop=("min", "max")), "attributes[rating]",
                 "a finite hi - lo", id="infinite-width"),
    pytest.param(_with({"type": "continuous", "lo": "0", "hi": 1.0}, drop=("min", "max")), "attributes[rating].lo",
                 "a finite number", id="lo-string"),
    pytest.param(_with({"type": "continuous", "lo": 0.0, "hi": float("inf")}, drop=("min", "max")),
                 "attributes[rating].hi", "a finite number", id="hi-infinite"),
    pytest.param(_with({"type": "continuous", "lo": 0.0, "hi": 1.0, "bits": 0}, drop=("min", "max")),
                 "attributes[rating].bits", f"an integer in [1, {MAX_BITS}]", id="bits-zero"),
    pytest.param(_with({"type": "continuous", "lo": 0.0, "hi": 1.0, "bits": MAX_BITS + 1}, drop=("min", "max")),
                 "attributes[rating].bits", f"an integer in [1, {MAX_BITS}]", id="bits-too-many"),
    pytest.param(_with({"type": "continuous", "lo": 0.0, "hi": 1.0, "bits": 2.5}, drop=("min", "max")),
                 "attributes[rating].bits", f"an integer in [1, {MAX_BITS}]", id="bits-fraction"),
    pytest.param(_with({"type": "continuous", "lo": 1e6, "hi": 1e6 + 1e-6, "bits": 24}, drop=("min", "max")),
                 "attributes[rating].bits", "above 8 float ulps", id="buckets-below-float-resolution"),
    pytest.param(_with({"type": "continuous", "hi": 1.0}, drop=("min", "max")), "attributes[rating]",
                 "the fields ['bits', 'hi', 'lo']", id="missing-lo"),
    pytest.param(_with({"type": "categorical", "values": ["a"]}, drop=("min", "max")), "attributes[rating].values",
                 "2 to", id="one-category"),
    pytest.param(_with({"type": "categorical", "values": ["a", "a"]}, drop=("min", "max")),
                 "attributes[rating].values", "distinct strings", id="duplicate-categories"),
    pytest.param(_with({"type": "categorical", "values": ["a", 2]}, drop=("min", "max")),
                 "attributes[rating].values", "a list of strings", id="category-not-a-string"),
    pytest.param(_with({"public": True}), "attributes", "at least one private attribute", id="no-private-attribute"),
    pytest.param(_with(attributes=[dict(BIG, name=f"a{j}") for j in range(2)]), "attributes",
                 f"a private domain of at most {MAX_BATCH_WEIGHTS} values", id="private-domain-too-large"),
    pytest.param(_with({"min": 0, "max": 10**9 - 1}), "attributes", f"a private domain of at most {MAX_BATCH_WEIGHTS}",
                 id="private-domain-no-query-could-use"),
    pytest.param(_with(epsilon=0), "epsilon", "a finite number > 0", id="epsilon-zero"),
    pytest.param(_with(epsilon=-1.0), "epsilon", "a finite number > 0", id="epsilon-negative"),
    pytest.param(_with(epsilon=float("nan")), "epsilon", "a finite number > 0", id="epsilon-nan"),
    pytest.param(_with(epsilon=float("inf")), "epsilon", "a finite number > 0", id="epsilon-inf"),
    pytest.param(_with(epsilon="1.0"), "epsilon", "a finite number > 0", id="epsilon-string"),
    pytest.param(_with(epsilon=True), "epsilon", "a finite number > 0", id="epsilon-bool"),
    pytest.param(_with(epsilon=DROP), "epsilon", "a finite number > 0", id="missing-epsilon"),
    pytest.param(_with(name=DROP), "name", "a non-empty string", id="missing-name-of-schema"),
    pytest.param(_with(name=""), "name", "a non-empty string", id="empty-name-of-schema"),
    pytest.param(_with(attributes=DROP), "attributes", "a non-empty list", id="missing-attributes"),
    pytest.param(_with(attributes=[]), "attributes", "a non-empty list", id="empty-attributes"),
    pytest.param(_with(attributes=["rating"]), "attributes[0]", "an object", id="attribute-not-an-object"),
    pytest.param(_with(owner="me"), "schema", "fields name, epsilon, attributes", id="unknown-schema-field"),
    pytest.param('{"name": "ratings", "epsilon": 1.0,', "schema", "a JSON object", id="invalid-json"),
    pytest.param("[1, 2]", "schema", "a JSON object", id="json-not-an-object"),
    pytest.param('{"name": "x", "epsilon": NaN, "attributes": []}', "attributes", "a non-empty list",
                 id="json-nan-and-no-attributes"),
]


@pytest.mark.parametrize("doc, field, legal", BAD_SCHEMAS)
def test_bad_schema_is_rejected_naming_field_and_legal_range(doc, field, legal):
    with pytest.raises(SchemaError) as info:
        Schema.from_json(doc)
    assert info.value.field == field
    assert legal in info.value.legal
    assert field in str(info.value) and info.value.legal in str(info.value)


def test_private_domain_limit_is_the_query_batch_limit():
    """Issue 16: a 10^9-value private domain was accepted, yet every query on it was refused (a JSON query
    holds at least |D| weights, at most 2^24; a packed one |D| weights, at most MAX_BATCH_WEIGHTS = 2^28 per
    batch). The schema refuses exactly the domains the query service could never answer."""
    from ldpsynth.aggregator.ingress import query_service

    assert query_service.MAX_BATCH_WEIGHTS is MAX_BATCH_WEIGHTS
    largest = Schema("s", 1.0, (IntegerAttribute("v", False, 0, MAX_BATCH_WEIGHTS - 1),))
    assert largest.private_domain_size == MAX_BATCH_WEIGHTS
    with pytest.raises(SchemaError) as info:
        Schema("s", 1.0, (IntegerAttribute("v", False, 0, MAX_BATCH_WEIGHTS // 2 - 1), BinaryAttribute("b"),
                          BinaryAttribute("c")))
    assert str(MAX_BATCH_WEIGHTS) in info.value.legal and f"|D| = {2 * MAX_BATCH_WEIGHTS}" in info.value.problem


def test_schema_constructor_reports_bad_epsilon_as_schema_error():
    with pytest.raises(SchemaError) as info:
        Schema("s", float("nan"), (BinaryAttribute("b"),))
    assert info.value.field == "epsilon"


# ----- out-of-domain values: attribute, row position and legal range, never the value ---------------

OUT_OF_DOMAIN = [
    pytest.param(IntegerAttribute("rating", False, 1, 5), [1, 2, 4242424242, 3], 2, "4242424242", "[1, 5]",
                 id="integer-too-large"),
    pytest.param(IntegerAttribute("rating", False, 1, 5), [1, -4242424242], 1, "4242424242", "[1, 5]",
                 id="integer-negative"),
    pytest.param(IntegerAttribute("rating", False, 1, 5), [1, 2.4242424242], 1, "4242424242", "[1, 5]",
                 id="integer-fraction"),
    pytest.param(IntegerAttribute("rating", False, 1, 5), ["1", "secret4242"], 1, "secret4242", "[1, 5]",
                 id="integer-garbage-string"),
    pytest.param(IntegerAttribute("rating", False, 1, 5), [1.0, float("nan")], 1, "nan", "[1, 5]", id="integer-nan"),
    pytest.param(CategoricalAttribute("colour", False, ("red", "blue")), ["red", "SECRET-xyzzy"], 1, "SECRET-xyzzy",
                 "'red', 'blue'", id="categorical"),
    pytest.param(BinaryAttribute("smoker"), [0, 1, 4242], 2, "4242", "0 or 1", id="binary-number"),
    pytest.param(BinaryAttribute("smoker"), ["yes", "secret-maybe"], 1, "secret-maybe", "0 or 1", id="binary-word"),
    pytest.param(ContinuousAttribute("income", False, 0.0, 10.0, 3), [1.0, 123456.789], 1, "123456", "[0.0, 10.0]",
                 id="continuous-above"),
    pytest.param(ContinuousAttribute("income", False, 0.0, 10.0, 3), [-0.424242], 0, "424242", "[0.0, 10.0]",
                 id="continuous-below"),
    pytest.param(ContinuousAttribute("income", False, 0.0, 10.0, 3), ["1.0", "secret7.5x"], 1, "secret7.5x",
                 "[0.0, 10.0]", id="continuous-garbage"),
]


@pytest.mark.parametrize("attr, column, position, secret, legal", OUT_OF_DOMAIN)
def test_out_of_domain_value_error(attr, column, position, secret, legal):
    with pytest.raises(ValidationError) as info:
        attr.encode(column)
    error = info.value
    assert error.field == attr.name and error.position == position and legal in error.legal
    message = str(error)
    assert attr.name in message and f"position {position}" in message and error.legal in message
    assert secret.lower() not in message.lower() and secret.lower() not in repr(error.args).lower()
    chained = error.__cause__ or error.__context__
    while chained is not None:  # no chained exception may carry the value either (e.g. a float() error)
        assert secret.lower() not in str(chained).lower()
        chained = chained.__cause__ or chained.__context__


def test_out_of_domain_position_counts_the_offset_and_the_schema_reports_it():
    with pytest.raises(ValidationError) as info:
        MIXED.encode_private({"colour": ["red", "red"], "smoker": [1, 0], "rating": [3, 98765], "income": [1.0, 2.0]},
                             offset=1000)
    assert info.value.field == "rating" and info.value.position == 1001 and "98765" not in str(info.value)


def test_module_doctests():
    assert doctest.testmod(schema_module, raise_on_error=False).failed == 0
