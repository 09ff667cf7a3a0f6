from ldpsynth.shared.wire import collection_pb2 as _collection_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SealedAck(_message.Message):
    __slots__ = ("sequence", "accepted")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    accepted: int
    def __init__(self, sequence: _Optional[int] = ..., accepted: _Optional[int] = ...) -> None: ...
