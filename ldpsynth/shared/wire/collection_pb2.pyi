from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetCollectionRequest(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: str
    def __init__(self, collection: _Optional[str] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("max_rows_per_client", "max_batch_reports", "max_message_bytes")
    MAX_ROWS_PER_CLIENT_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_REPORTS_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_rows_per_client: int
    max_batch_reports: int
    max_message_bytes: int
    def __init__(self, max_rows_per_client: _Optional[int] = ..., max_batch_reports: _Optional[int] = ..., max_message_bytes: _Optional[int] = ...) -> None: ...

class Collection(_message.Message):
    __slots__ = ("name", "schema_json", "card_json", "mechanism_version", "limits", "sealing")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    CARD_JSON_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_VERSION_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    SEALING_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema_json: str
    card_json: str
    mechanism_version: str
    limits: Limits
    sealing: Sealing
    def __init__(self, name: _Optional[str] = ..., schema_json: _Optional[str] = ..., card_json: _Optional[str] = ..., mechanism_version: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., sealing: _Optional[_Union[Sealing, _Mapping]] = ...) -> None: ...

class Sealing(_message.Message):
    __slots__ = ("suite", "kem_id", "kdf_id", "aead_id", "public_key", "key_id", "sealed_report_bytes")
    SUITE_FIELD_NUMBER: _ClassVar[int]
    KEM_ID_FIELD_NUMBER: _ClassVar[int]
    KDF_ID_FIELD_NUMBER: _ClassVar[int]
    AEAD_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SEALED_REPORT_BYTES_FIELD_NUMBER: _ClassVar[int]
    suite: str
    kem_id: int
    kdf_id: int
    aead_id: int
    public_key: bytes
    key_id: bytes
    sealed_report_bytes: int
    def __init__(self, suite: _Optional[str] = ..., kem_id: _Optional[int] = ..., kdf_id: _Optional[int] = ..., aead_id: _Optional[int] = ..., public_key: _Optional[bytes] = ..., key_id: _Optional[bytes] = ..., sealed_report_bytes: _Optional[int] = ...) -> None: ...

class ReportBatch(_message.Message):
    __slots__ = ("collection", "mechanism_version", "sequence", "report_ids", "private_codes", "public_codes", "report_bitmaps", "olh_seeds", "olh_buckets", "hadamard_reports")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_VERSION_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    REPORT_IDS_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_CODES_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_CODES_FIELD_NUMBER: _ClassVar[int]
    REPORT_BITMAPS_FIELD_NUMBER: _ClassVar[int]
    OLH_SEEDS_FIELD_NUMBER: _ClassVar[int]
    OLH_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    HADAMARD_REPORTS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    mechanism_version: str
    sequence: int
    report_ids: bytes
    private_codes: bytes
    public_codes: _containers.RepeatedScalarFieldContainer[bytes]
    report_bitmaps: bytes
    olh_seeds: bytes
    olh_buckets: bytes
    hadamard_reports: bytes
    def __init__(self, collection: _Optional[str] = ..., mechanism_version: _Optional[str] = ..., sequence: _Optional[int] = ..., report_ids: _Optional[bytes] = ..., private_codes: _Optional[bytes] = ..., public_codes: _Optional[_Iterable[bytes]] = ..., report_bitmaps: _Optional[bytes] = ..., olh_seeds: _Optional[bytes] = ..., olh_buckets: _Optional[bytes] = ..., hadamard_reports: _Optional[bytes] = ...) -> None: ...

class BatchAck(_message.Message):
    __slots__ = ("sequence", "accepted", "duplicates")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    accepted: int
    duplicates: int
    def __init__(self, sequence: _Optional[int] = ..., accepted: _Optional[int] = ..., duplicates: _Optional[int] = ...) -> None: ...

class SealedBatch(_message.Message):
    __slots__ = ("collection", "key_id", "sequence", "reports", "pool_key")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    POOL_KEY_FIELD_NUMBER: _ClassVar[int]
    collection: str
    key_id: bytes
    sequence: int
    reports: bytes
    pool_key: int
    def __init__(self, collection: _Optional[str] = ..., key_id: _Optional[bytes] = ..., sequence: _Optional[int] = ..., reports: _Optional[bytes] = ..., pool_key: _Optional[int] = ...) -> None: ...

class ShuffledAck(_message.Message):
    __slots__ = ("sequence", "accepted", "duplicates", "undecryptable", "invalid")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    UNDECRYPTABLE_FIELD_NUMBER: _ClassVar[int]
    INVALID_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    accepted: int
    duplicates: int
    undecryptable: int
    invalid: int
    def __init__(self, sequence: _Optional[int] = ..., accepted: _Optional[int] = ..., duplicates: _Optional[int] = ..., undecryptable: _Optional[int] = ..., invalid: _Optional[int] = ...) -> None: ...
