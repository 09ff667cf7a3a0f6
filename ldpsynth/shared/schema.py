"""Collection schema and the mixed-radix encoding of the private domain D.

A collection's schema is its public contract: attributes with a name, a type and a flag saying
whether the attribute is *public* (sent in clear, e.g. the movie a rating is about) or *private*
(perturbed by mechanism E on the device). The private domain is the product of the private
attributes' value sets,

.. math::  D = A_1 \\times \\dots \\times A_m, \\qquad |D| = \\prod_j |A_j|,

and a private row :math:`(a_1, \\dots, a_m)` is encoded in mixed radix (first attribute most
significant, like C order): :math:`\\mathrm{code} = \\sum_j a_j \\prod_{l > j} |A_l|`.
Public attributes are encoded the same way into a *public key*.

The attribute kinds (continuous ones discretised as in WYZ §V-A) are :mod:`ldpsynth.shared.attributes`,
a shuffled collection's ``"shuffle"`` block :mod:`ldpsynth.shared.shuffle_spec`.

Error messages name the attribute, the position and the legal range, never the value itself:
a private value must not end up in a server log.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ldpsynth.shared import jsonio
from ldpsynth.shared.attributes import (
    MAX_BITS,
    MAX_DOMAIN_SIZE,
    Attribute,
    BinaryAttribute,
    CategoricalAttribute,
    ContinuousAttribute,
    IntegerAttribute,
    NumericAttribute,
    bits_for_rows,
)
from ldpsynth.shared.collection_fields import collection_fields_json, parse_collection_fields
from ldpsynth.shared.errors import SchemaError, ValidationError, schema_field
from ldpsynth.shared.lifecycle import Lifecycle
from ldpsynth.shared.mechanisms.registry import MECHANISMS, NUMERIC_MECHANISMS, max_domain_size
from ldpsynth.shared.numeric.collection import numeric_mechanism
from ldpsynth.shared.shuffle_spec import MAX_MIN_BATCH, ShuffleSpec
from ldpsynth.shared.validation import check_choice, check_codes, check_epsilon, check_int

# The attribute kinds, MAX_DOMAIN_SIZE, MAX_BITS and bits_for_rows (ldpsynth.shared.attributes) stay public names
# of this module, as they were before they had their own.
__all__ = [
    "MAX_DOMAIN_SIZE",
    "MAX_BATCH_WEIGHTS",
    "MAX_BITS",
    "bits_for_rows",
    "Attribute",
    "CategoricalAttribute",
    "BinaryAttribute",
    "IntegerAttribute",
    "ContinuousAttribute",
    "NumericAttribute",
    "Schema",
]

#: Most weights (float64, held in memory) of one batch of queries: the query service refuses a larger
#: batch (RESOURCE_EXHAUSTED). Every query holds at least one weight per value of the private domain
#: D (a packed linear query exactly |D|, JSON queries at least |D|, at most 2^24), so a schema with a
#: larger |D| could not be queried at all: it is refused here, with this same limit. (A packed row of
#: |D| float64 weights must also fit in one message, at most 2^31 - 1 bytes: the same bound, give or
#: take the message's envelope; the default --max-message-bytes, 64 MiB, allows about 2^23.)
MAX_BATCH_WEIGHTS = 1 << 28


def _radix_weights(sizes: Sequence[int]) -> np.ndarray:
    """Place values of a mixed-radix number, first digit most significant."""
    weights = [1] * len(sizes)
    for j in range(len(sizes) - 2, -1, -1):
        weights[j] = weights[j + 1] * int(sizes[j + 1])
    return np.asarray(weights, dtype=np.int64)


@dataclass(frozen=True)
class Schema:
    """A collection: its name, ε, attributes, mechanism, lifecycle and (shuffled) :class:`ShuffleSpec`.

    Parameters
    ----------
    name : str
        The collection's name: a non-empty string of at most 128 characters.
    epsilon : float
        The ε each row is released with: a finite number > 0.
    attributes : sequence of Attribute
        The columns, with distinct names and at least one private attribute; the private domain
        :math:`|D|` (the product of the private attributes' sizes) at most 2^28
        (:data:`MAX_BATCH_WEIGHTS`), the public domain at most 2^62 values.
    shuffle : ShuffleSpec or None, default None
        A shuffled collection's central guarantee; ``None``: the collection is not shuffled.
    mechanism : str, default "E"
        ``"E"`` (k-ary randomized response, WYZ eq. 16) or a frequency oracle, ``"OUE"``,
        ``"OLH"``, ``"HR"``, ``"SS"`` (:mod:`ldpsynth.shared.mechanisms`). A collection with a
        :class:`NumericAttribute` takes that attribute's mechanism (``"HM"`` or ``"SW"``): it must then have
        exactly one private attribute (the numeric one) and ``mechanism`` "E" (the default, replaced) or the
        attribute's. Any mechanism may be shuffled: the accountant's bound is
        :func:`~ldpsynth.shared.mechanisms.registry.shuffle_bound`'s (k-RR's blanket for E, FMT21's clones for
        the others).
    opens, closes : int or None, default None
        The lifecycle (:mod:`ldpsynth.shared.lifecycle`): when the collection starts and stops
        taking reports, in whole seconds since the Unix epoch; ``None``: not given.
    min_batch : int, default 1
        The fewest reports a release or answer is computed from: an integer in
        [1, :data:`MAX_MIN_BATCH`].

    Raises
    ------
    SchemaError
        A :class:`~ldpsynth.shared.errors.ValidationError` naming the field (``name``, ``epsilon``,
        ``attributes``, ``shuffle``, ``mechanism``, ``opens``,
        ``closes``, ``min_batch``) that is out of its legal range.
    """

    name: str
    epsilon: float
    attributes: tuple[Attribute, ...]
    shuffle: ShuffleSpec | None = None
    mechanism: str = "E"
    opens: int | None = None
    closes: int | None = None
    min_batch: int = 1
    _by_name: dict[str, Attribute] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or len(self.name) > 128:
            raise SchemaError("name", "a non-empty string of at most 128 characters", f"got {self.name!r}")
        with schema_field():
            object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon"))
        attrs = tuple(self.attributes)
        object.__setattr__(self, "attributes", attrs)
        names = [a.name for a in attrs]
        if len(set(names)) != len(names):
            raise SchemaError("attributes", "distinct attribute names", "duplicate names")
        if not any(not a.public for a in attrs):
            raise SchemaError("attributes", "at least one private attribute", "all attributes are public")
        object.__setattr__(self, "_by_name", {a.name: a for a in attrs})
        self._check_numeric()
        if self.private_domain_size > MAX_BATCH_WEIGHTS:
            raise SchemaError("attributes", f"a private domain of at most {MAX_BATCH_WEIGHTS} values (2^28: every "
                              "query holds a weight per value of D and a query batch at most that many weights)",
                              f"got |D| = {self.private_domain_size}")
        if self.public_domain_size > MAX_DOMAIN_SIZE:
            raise SchemaError("attributes", "a public domain of at most 2^62 values", "too large")
        if self.shuffle is not None and not isinstance(self.shuffle, ShuffleSpec):
            raise SchemaError("shuffle", "a ShuffleSpec or None", f"got {type(self.shuffle).__name__}")
        with schema_field():
            check_choice(self.mechanism, "mechanism", MECHANISMS + NUMERIC_MECHANISMS)
            object.__setattr__(self, "min_batch", check_int(self.min_batch, "min_batch", 1, MAX_MIN_BATCH))
            for key in ("opens", "closes"):
                if getattr(self, key) is not None:
                    check_int(getattr(self, key), key, -(2**62), 2**62, legal="whole seconds since the Unix epoch")
        if self.mechanism in MECHANISMS and self.mechanism != "E":
            largest = max_domain_size(self.mechanism)
            if self.private_domain_size > largest:
                raise SchemaError("mechanism", f"E, or {self.mechanism} over a private domain of at most "
                                  f"{largest} values", f"got |D| = {self.private_domain_size}")
        Lifecycle(self.opens, self.closes)  # closes after opens

    def _check_numeric(self) -> None:
        """A numeric attribute's rules (class docstring); sets ``mechanism`` to the attribute's."""
        numeric = self.numeric
        if numeric is None:
            if self.mechanism in NUMERIC_MECHANISMS:
                raise SchemaError("mechanism", f"one of {list(MECHANISMS)} (HM and SW are the mechanisms of a "
                                  "numeric attribute: set them on the attribute)", f"got {self.mechanism!r}")
            return
        private = len(self.private_attributes)
        if private != 1:
            raise SchemaError("attributes", "exactly one private attribute in a collection with a numeric attribute "
                              "(the numeric one, plus any public attributes: a report carries one number)",
                              f"got {private} private attributes")
        if self.mechanism not in ("E", numeric.mechanism):
            raise SchemaError("mechanism", f"absent or {numeric.mechanism!r} (the mechanism of the numeric attribute "
                              f"{numeric.name!r})", f"got {self.mechanism!r}")
        object.__setattr__(self, "mechanism", numeric.mechanism)
        with schema_field():
            numeric_mechanism(self.mechanism, self.epsilon)     # the ε within the exact sampler's resolution

    # ----- lifecycle -----------------------------------------------------------------------
    @property
    def lifecycle(self) -> Lifecycle:
        """When the collection takes reports."""
        return Lifecycle(self.opens, self.closes)

    @property
    def minimum_batch(self) -> tuple[int, str]:
        """The fewest reports a release is computed from, and the field that sets it: the larger of
        ``min_batch`` and a shuffled collection's ``shuffle.min_batch`` (1, ``"min_batch"``: no minimum)."""
        if self.shuffle is not None and self.shuffle.min_batch > self.min_batch:
            return self.shuffle.min_batch, "shuffle.min_batch"
        return self.min_batch, "min_batch"

    # ----- views -------------------------------------------------------------------------
    @functools.cached_property
    def private_attributes(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if not a.public)

    @functools.cached_property
    def public_attributes(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if a.public)

    @functools.cached_property
    def numeric(self) -> NumericAttribute | None:
        """The numeric attribute of a numeric collection (its one private attribute); ``None`` otherwise."""
        return next((a for a in self.attributes if isinstance(a, NumericAttribute)), None)

    @functools.cached_property
    def private_domain_size(self) -> int:
        """:math:`|D|`, the product of the private attributes' sizes; in a numeric collection the report domain,
        the size of its mechanism's output set (:mod:`ldpsynth.shared.numeric.collection`)."""
        if self.numeric is not None:
            return numeric_mechanism(self.mechanism, self.epsilon).domain_size
        return math.prod(a.size for a in self.private_attributes)

    @functools.cached_property
    def public_domain_size(self) -> int:
        """Number of distinct public keys (1 when there are no public attributes)."""
        return math.prod(a.size for a in self.public_attributes)

    def attribute(self, name: str) -> Attribute:
        """The attribute called ``name``.

        Parameters
        ----------
        name : str
            One of the schema's attribute names.

        Returns
        -------
        Attribute

        Raises
        ------
        ValidationError
            Naming ``attribute``: no attribute of that name.
        """
        try:
            return self._by_name[name]
        except KeyError:
            raise ValidationError("attribute", f"one of {sorted(self._by_name)}",
                                  f"unknown attribute {name!r}") from None

    # ----- mixed radix ---------------------------------------------------------------------
    @staticmethod
    def _combine(group: tuple[Attribute, ...], columns: Mapping[str, npt.ArrayLike], *, encoded: bool,
                 offset: int) -> np.ndarray:
        weights = _radix_weights([a.size for a in group])
        total: np.ndarray | None = None
        for attr, w in zip(group, weights):
            if attr.name not in columns:
                raise ValidationError(attr.name, attr.legal_range, "missing column")
            col = columns[attr.name]
            codes = attr.check_codes(col) if encoded else attr.encode(col, offset=offset)
            if total is not None and len(codes) != len(total):
                raise ValidationError(attr.name, f"a column of {len(total)} rows", f"got {len(codes)} rows")
            total = codes * w if total is None else total + codes * w
        return np.zeros(0, np.int64) if total is None else total

    def encode_private(self, columns: Mapping[str, npt.ArrayLike], *, offset: int = 0) -> np.ndarray:
        """Raw private columns -> codes in ``[0, |D|)`` (mixed radix, first attribute most significant).

        Parameters
        ----------
        columns : mapping of str to array_like
            Attribute name -> raw values, one column of equal length per private attribute
            (other columns are ignored); each value in its attribute's legal range.
        offset : int, default 0
            Added to the row position an error names (the index of the first row, for chunked input).

        Returns
        -------
        numpy.ndarray
            int64 codes over D, one per row.

        Raises
        ------
        ValidationError
            Naming the attribute: a missing column, an illegal value (at its position) or a column
            of another length.
        """
        return self._combine(self.private_attributes, columns, encoded=False, offset=offset)

    def encode_public(self, columns: Mapping[str, npt.ArrayLike], *, offset: int = 0) -> np.ndarray:
        """Raw public columns -> public keys in ``[0, public_domain_size)``; zeros when there are none.

        Parameters
        ----------
        columns : mapping of str to array_like
            Attribute name -> raw values, one column of equal length per public attribute (other
            columns are ignored; with no public attribute only the first column's length is used).
        offset : int, default 0
            Added to the row position an error names (the index of the first row, for chunked input).

        Returns
        -------
        numpy.ndarray
            int64 public keys, one per row.

        Raises
        ------
        ValidationError
            Naming the attribute: a missing column, an illegal value (at its position) or a column
            of another length.
        """
        if not self.public_attributes:
            n = np.shape(next(iter(columns.values())))[0] if columns else 0
            return np.zeros(n, np.int64)
        return self._combine(self.public_attributes, columns, encoded=False, offset=offset)

    def private_codes_of(self, digits: Mapping[str, npt.ArrayLike]) -> np.ndarray:
        """Per-attribute private codes (checked) -> codes over D: the inverse of :meth:`private_digits`.

        Parameters
        ----------
        digits : mapping of str to array_like
            Private attribute name -> integer codes in ``[0, size)`` of that attribute, one column
            of equal length per private attribute.

        Returns
        -------
        numpy.ndarray
            int64 codes in ``[0, |D|)``.

        Raises
        ------
        ValidationError
            Naming the attribute: a missing column, a code out of its range (at its position) or a
            column of another length.
        """
        return self._combine(self.private_attributes, digits, encoded=True, offset=0)

    @functools.cached_property
    def _public_weights(self) -> np.ndarray:
        return _radix_weights([a.size for a in self.public_attributes])

    def fold_public_codes(self, codes: np.ndarray) -> np.ndarray:
        """Public keys of public codes already checked against their attributes, not checked again.

        The same mixed radix as :meth:`public_keys_of` (the schema's one set of place values), as one
        product: for the ``public_codes`` of a validated :class:`~ldpsynth.shared.reports.Reports`.

        Parameters
        ----------
        codes : numpy.ndarray
            ``(n, m)`` int64 codes, column ``j`` in ``[0, size)`` of the j-th public attribute.

        Returns
        -------
        numpy.ndarray
            ``(n,)`` int64 public keys (zeros when there is no public attribute).
        """
        if not self.public_attributes:
            return np.zeros(len(codes), np.int64)
        return codes @ self._public_weights

    def public_keys_of(self, digits: Mapping[str, npt.ArrayLike], rows: int) -> np.ndarray:
        """Per-attribute public codes (checked) -> public keys (zeros when there is no public attribute).

        Parameters
        ----------
        digits : mapping of str to array_like
            Public attribute name -> integer codes in ``[0, size)`` of that attribute, one column
            of equal length per public attribute.
        rows : int
            The number of rows: the length of the zeros returned when the schema has no public
            attribute (not used otherwise).

        Returns
        -------
        numpy.ndarray
            int64 public keys in ``[0, public_domain_size)``.

        Raises
        ------
        ValidationError
            Naming the attribute: a missing column, a code out of its range (at its position) or a
            column of another length.
        """
        if not self.public_attributes:
            return np.zeros(rows, np.int64)
        return self._combine(self.public_attributes, digits, encoded=True, offset=0)

    def private_digits(self, codes: npt.ArrayLike) -> dict[str, np.ndarray]:
        """Split private codes into per-attribute codes (inverse of the mixed radix).

        Parameters
        ----------
        codes : array_like
            Integer codes in ``[0, |D|)``.

        Returns
        -------
        dict of str to numpy.ndarray
            Private attribute name -> int64 codes of that attribute.

        Raises
        ------
        ValidationError
            Naming ``private_code``: codes that are not integers or lie outside ``[0, |D|)``.
        """
        return self._split(self.private_attributes, self.check_private_codes(codes))

    def public_digits(self, keys: npt.ArrayLike) -> dict[str, np.ndarray]:
        """Split public keys into per-attribute codes.

        Parameters
        ----------
        keys : array_like
            Integer public keys in ``[0, public_domain_size)``.

        Returns
        -------
        dict of str to numpy.ndarray
            Public attribute name -> int64 codes of that attribute (empty with no public attribute).

        Raises
        ------
        ValidationError
            Naming ``public_key``: keys that are not integers or lie outside ``[0, public_domain_size)``.
        """
        return self._split(self.public_attributes, check_codes(keys, "public_key", self.public_domain_size))

    @staticmethod
    def _split(group: tuple[Attribute, ...], codes: np.ndarray) -> dict[str, np.ndarray]:
        weights = _radix_weights([a.size for a in group])
        return {a.name: (codes // w) % a.size for a, w in zip(group, weights)}

    def decode_private(self, codes: npt.ArrayLike) -> dict[str, np.ndarray]:
        """Private codes -> raw columns (continuous attributes: bucket lower edges).

        Parameters
        ----------
        codes : array_like
            Integer codes in ``[0, |D|)``.

        Returns
        -------
        dict of str to numpy.ndarray
            Private attribute name -> its values (categorical: the listed strings; binary: 0/1;
            integer: the integers; continuous: bucket lower edges).

        Raises
        ------
        ValidationError
            Naming ``private_code``: codes that are not integers or lie outside ``[0, |D|)``.
        """
        return {name: self._by_name[name].decode(d) for name, d in self.private_digits(codes).items()}

    def decode_public(self, keys: npt.ArrayLike) -> dict[str, np.ndarray]:
        """Public keys -> raw columns.

        Parameters
        ----------
        keys : array_like
            Integer public keys in ``[0, public_domain_size)``.

        Returns
        -------
        dict of str to numpy.ndarray
            Public attribute name -> its values (as :meth:`decode_private`).

        Raises
        ------
        ValidationError
            Naming ``public_key``: keys that are not integers or lie outside ``[0, public_domain_size)``.
        """
        return {name: self._by_name[name].decode(d) for name, d in self.public_digits(keys).items()}

    def check_private_codes(self, codes: npt.ArrayLike, field_name: str = "private_code") -> np.ndarray:
        """Check that perturbed codes lie in ``[0, |D|)`` (the server's validation of a report).

        Parameters
        ----------
        codes : array_like
            Integer codes in ``[0, |D|)``.
        field_name : str, default "private_code"
            The field an error names.

        Returns
        -------
        numpy.ndarray
            ``codes`` as int64.

        Raises
        ------
        ValidationError
            Naming ``field_name``: codes that are not integers or lie outside ``[0, |D|)`` (the
            first bad position).
        """
        return check_codes(codes, field_name, self.private_domain_size)

    # ----- JSON ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The schema as its JSON object (what :meth:`from_json` reads).

        Returns
        -------
        dict
            ``name``, ``epsilon``, ``attributes`` and, for a shuffled collection, ``shuffle``.
        """
        out = collection_fields_json(self.name, self.epsilon, self.attributes, self.shuffle, self.opens, self.closes,
                                     self.min_batch)
        if self.mechanism != "E" and self.numeric is None:  # absent for E (E's schemas, and so its cards and
            # fingerprints, stay as they were) and for a numeric collection (its attribute names it)
            out["mechanism"] = self.mechanism
        return out

    def dumps(self) -> str:
        """The schema as compact JSON text with sorted keys.

        Returns
        -------
        str
        """
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str) -> Schema:
        """The schema of a JSON object (docs/contract.md §2), or of its JSON text.

        Parameters
        ----------
        obj : mapping or str
            An object with the fields ``name``, ``epsilon``, ``attributes`` (a non-empty list of
            attribute objects) and optionally ``shuffle``, and no others; or its JSON text.

        Returns
        -------
        Schema

        Raises
        ------
        SchemaError
            A :class:`~ldpsynth.shared.errors.ValidationError` naming the field (``schema``,
            ``name``, ``epsilon``, ``attributes``, ``attributes[i]...``, ``shuffle...``) that is
            missing, unknown, malformed or out of its legal range.
        """
        if isinstance(obj, str):
            with schema_field():
                obj = jsonio.loads(obj, "schema", "a JSON object")
        if not isinstance(obj, Mapping):
            raise SchemaError("schema", "a JSON object with name, epsilon, attributes", "not an object")
        extra = set(obj) - {"name", "epsilon", "attributes", "shuffle", "mechanism", "opens", "closes", "min_batch"}
        if extra:
            raise SchemaError("schema", "fields name, epsilon, attributes, shuffle, mechanism, opens, closes, "
                              "min_batch",
                              f"unknown fields {sorted(extra)}")
        return cls(**parse_collection_fields(obj), mechanism=obj.get("mechanism", "E"))

    @classmethod
    def load(cls, path: str | Path) -> Schema:
        """The schema in the JSON file at ``path`` (:meth:`from_json`).

        Parameters
        ----------
        path : str or pathlib.Path
            A readable UTF-8 JSON file.

        Returns
        -------
        Schema

        Raises
        ------
        ValidationError
            Naming ``schema``: the file cannot be read or is not UTF-8; a
            :class:`~ldpsynth.shared.errors.SchemaError` for its content (as :meth:`from_json`).
        """
        return cls.from_json(jsonio.read_text(path, "schema"))
