from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdvanceRoundRequest(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: str
    def __init__(self, collection: _Optional[str] = ...) -> None: ...

class AdvanceRoundResponse(_message.Message):
    __slots__ = ("collection", "closed_round", "reports", "finished", "open_round", "candidates", "results_json")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    CLOSED_ROUND_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    OPEN_ROUND_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    RESULTS_JSON_FIELD_NUMBER: _ClassVar[int]
    collection: str
    closed_round: int
    reports: int
    finished: bool
    open_round: int
    candidates: int
    results_json: str
    def __init__(self, collection: _Optional[str] = ..., closed_round: _Optional[int] = ..., reports: _Optional[int] = ..., finished: _Optional[bool] = ..., open_round: _Optional[int] = ..., candidates: _Optional[int] = ..., results_json: _Optional[str] = ...) -> None: ...

class LinearQueries(_message.Message):
    __slots__ = ("weights", "normalization")
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    NORMALIZATION_FIELD_NUMBER: _ClassVar[int]
    weights: bytes
    normalization: str
    def __init__(self, weights: _Optional[bytes] = ..., normalization: _Optional[str] = ...) -> None: ...

class GroupedQueries(_message.Message):
    __slots__ = ("attribute", "value_codes", "weights", "default_weights", "normalization")
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    VALUE_CODES_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    NORMALIZATION_FIELD_NUMBER: _ClassVar[int]
    attribute: str
    value_codes: bytes
    weights: bytes
    default_weights: bytes
    normalization: str
    def __init__(self, attribute: _Optional[str] = ..., value_codes: _Optional[bytes] = ..., weights: _Optional[bytes] = ..., default_weights: _Optional[bytes] = ..., normalization: _Optional[str] = ...) -> None: ...

class EstimateRequest(_message.Message):
    __slots__ = ("collection", "level", "queries_json", "linear", "grouped")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    QUERIES_JSON_FIELD_NUMBER: _ClassVar[int]
    LINEAR_FIELD_NUMBER: _ClassVar[int]
    GROUPED_FIELD_NUMBER: _ClassVar[int]
    collection: str
    level: float
    queries_json: str
    linear: LinearQueries
    grouped: GroupedQueries
    def __init__(self, collection: _Optional[str] = ..., level: _Optional[float] = ..., queries_json: _Optional[str] = ..., linear: _Optional[_Union[LinearQueries, _Mapping]] = ..., grouped: _Optional[_Union[GroupedQueries, _Mapping]] = ...) -> None: ...

class EstimateResponse(_message.Message):
    __slots__ = ("offset", "labels", "estimate", "proper_estimate", "proper_exact", "std_error", "ci_low", "ci_high", "bound", "bound_proper", "level", "n", "epsilon", "total", "guarantees", "methods", "rows")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    PROPER_ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    PROPER_EXACT_FIELD_NUMBER: _ClassVar[int]
    STD_ERROR_FIELD_NUMBER: _ClassVar[int]
    CI_LOW_FIELD_NUMBER: _ClassVar[int]
    CI_HIGH_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    BOUND_PROPER_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    GUARANTEES_FIELD_NUMBER: _ClassVar[int]
    METHODS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    offset: int
    labels: _containers.RepeatedScalarFieldContainer[str]
    estimate: bytes
    proper_estimate: bytes
    proper_exact: bytes
    std_error: bytes
    ci_low: bytes
    ci_high: bytes
    bound: bytes
    bound_proper: bytes
    level: float
    n: int
    epsilon: float
    total: int
    guarantees: Guarantees
    methods: _containers.RepeatedScalarFieldContainer[str]
    rows: bytes
    def __init__(self, offset: _Optional[int] = ..., labels: _Optional[_Iterable[str]] = ..., estimate: _Optional[bytes] = ..., proper_estimate: _Optional[bytes] = ..., proper_exact: _Optional[bytes] = ..., std_error: _Optional[bytes] = ..., ci_low: _Optional[bytes] = ..., ci_high: _Optional[bytes] = ..., bound: _Optional[bytes] = ..., bound_proper: _Optional[bytes] = ..., level: _Optional[float] = ..., n: _Optional[int] = ..., epsilon: _Optional[float] = ..., total: _Optional[int] = ..., guarantees: _Optional[_Union[Guarantees, _Mapping]] = ..., methods: _Optional[_Iterable[str]] = ..., rows: _Optional[bytes] = ...) -> None: ...

class Guarantees(_message.Message):
    __slots__ = ("scope", "local_epsilon", "rows_per_device", "domain_size", "shuffled", "target_delta", "min_batch", "shuffler", "group_labels", "group_reports", "computed", "note", "assume_injected", "central_epsilon", "central_delta", "central_evaluated_at", "operator_covered", "withheld_groups", "withheld_reports", "central_bound")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    LOCAL_EPSILON_FIELD_NUMBER: _ClassVar[int]
    ROWS_PER_DEVICE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_SIZE_FIELD_NUMBER: _ClassVar[int]
    SHUFFLED_FIELD_NUMBER: _ClassVar[int]
    TARGET_DELTA_FIELD_NUMBER: _ClassVar[int]
    MIN_BATCH_FIELD_NUMBER: _ClassVar[int]
    SHUFFLER_FIELD_NUMBER: _ClassVar[int]
    GROUP_LABELS_FIELD_NUMBER: _ClassVar[int]
    GROUP_REPORTS_FIELD_NUMBER: _ClassVar[int]
    COMPUTED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    ASSUME_INJECTED_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_EPSILON_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_DELTA_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_EVALUATED_AT_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_COVERED_FIELD_NUMBER: _ClassVar[int]
    WITHHELD_GROUPS_FIELD_NUMBER: _ClassVar[int]
    WITHHELD_REPORTS_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_BOUND_FIELD_NUMBER: _ClassVar[int]
    scope: str
    local_epsilon: float
    rows_per_device: int
    domain_size: int
    shuffled: bool
    target_delta: float
    min_batch: int
    shuffler: str
    group_labels: _containers.RepeatedScalarFieldContainer[str]
    group_reports: bytes
    computed: bool
    note: str
    assume_injected: int
    central_epsilon: float
    central_delta: float
    central_evaluated_at: int
    operator_covered: bool
    withheld_groups: int
    withheld_reports: int
    central_bound: str
    def __init__(self, scope: _Optional[str] = ..., local_epsilon: _Optional[float] = ..., rows_per_device: _Optional[int] = ..., domain_size: _Optional[int] = ..., shuffled: _Optional[bool] = ..., target_delta: _Optional[float] = ..., min_batch: _Optional[int] = ..., shuffler: _Optional[str] = ..., group_labels: _Optional[_Iterable[str]] = ..., group_reports: _Optional[bytes] = ..., computed: _Optional[bool] = ..., note: _Optional[str] = ..., assume_injected: _Optional[int] = ..., central_epsilon: _Optional[float] = ..., central_delta: _Optional[float] = ..., central_evaluated_at: _Optional[int] = ..., operator_covered: _Optional[bool] = ..., withheld_groups: _Optional[int] = ..., withheld_reports: _Optional[int] = ..., central_bound: _Optional[str] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: str
    def __init__(self, collection: _Optional[str] = ...) -> None: ...

class ExportChunk(_message.Message):
    __slots__ = ("card_json", "rows", "guarantees", "public_codes", "private_codes", "report_bitmaps", "olh_seeds", "olh_buckets", "hadamard_reports")
    CARD_JSON_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    GUARANTEES_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_CODES_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_CODES_FIELD_NUMBER: _ClassVar[int]
    REPORT_BITMAPS_FIELD_NUMBER: _ClassVar[int]
    OLH_SEEDS_FIELD_NUMBER: _ClassVar[int]
    OLH_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    HADAMARD_REPORTS_FIELD_NUMBER: _ClassVar[int]
    card_json: str
    rows: int
    guarantees: Guarantees
    public_codes: _containers.RepeatedScalarFieldContainer[bytes]
    private_codes: bytes
    report_bitmaps: bytes
    olh_seeds: bytes
    olh_buckets: bytes
    hadamard_reports: bytes
    def __init__(self, card_json: _Optional[str] = ..., rows: _Optional[int] = ..., guarantees: _Optional[_Union[Guarantees, _Mapping]] = ..., public_codes: _Optional[_Iterable[bytes]] = ..., private_codes: _Optional[bytes] = ..., report_bitmaps: _Optional[bytes] = ..., olh_seeds: _Optional[bytes] = ..., olh_buckets: _Optional[bytes] = ..., hadamard_reports: _Optional[bytes] = ...) -> None: ...
