"""Retry classification, backoff bounds, and batch sizing under the message limit."""

from __future__ import annotations

import random

import grpc
import numpy as np
import pytest

from ldpsynth.client import RetryPolicy
from ldpsynth.client.retry import RETRYABLE_STATUSES, is_retryable
from ldpsynth.client.submit import batch_capacity
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import Limits, report_bytes, reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids

from .client_fakes import ratings_info


def test_only_transient_statuses_are_retryable() -> None:
    assert RETRYABLE_STATUSES == {"UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED", "CANCELLED"}
    for final in ("INVALID_ARGUMENT", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED",
                  "PERMISSION_DENIED", "INTERNAL", "UNKNOWN", "UNIMPLEMENTED"):
        assert not is_retryable(final)
    assert {code.name for code in grpc.StatusCode} >= RETRYABLE_STATUSES


def test_backoff_grows_exponentially_within_its_jitter_band_and_caps() -> None:
    policy = RetryPolicy(initial_backoff=0.1, max_backoff=1.0, multiplier=2.0)
    rng = random.Random(7)
    for failures, cap in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (200, 1.0)]:
        delays = [policy.backoff(failures, rng) for _ in range(200)]
        assert cap / 2 <= min(delays) and max(delays) <= cap
        assert max(delays) - min(delays) > cap / 4  # jittered, not constant


@pytest.mark.parametrize("kwargs, field", [
    ({"max_attempts": 0}, "max_attempts"),
    ({"initial_backoff": 0.0}, "initial_backoff"),
    ({"initial_backoff": 2.0, "max_backoff": 1.0}, "max_backoff"),
    ({"multiplier": 0.5}, "multiplier"),
    ({"max_backoff": float("inf")}, "max_backoff"),
])
def test_policy_arguments_are_checked(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        RetryPolicy(**kwargs)
    assert info.value.field == field


def test_report_size_is_id_plus_one_code_per_attribute() -> None:
    assert report_bytes(0) == 24 and report_bytes(2) == 40


@pytest.mark.parametrize("message_bytes", [300, 1000, 4096, 65536])
def test_capacity_fits_the_message_limit_exactly_enough(message_bytes: int) -> None:
    info = ratings_info(limits=Limits(max_batch_reports=100_000, max_message_bytes=message_bytes))
    capacity = batch_capacity(info, channel_limit=1 << 30)
    m = len(info.schema.public_attributes)
    full = Reports(new_report_ids(capacity), np.full(capacity, 9, np.int64),
                   np.full((capacity, m), 2**62 - 1, np.int64))
    size = reports_to_proto(full, info.schema.name, info.card.version, 2**64 - 1).ByteSize()
    assert size <= message_bytes
    assert size + 2 * report_bytes(m) > message_bytes  # not wastefully small


def test_capacity_respects_batch_limits_and_channel_limit() -> None:
    info = ratings_info(limits=Limits(max_batch_reports=50, max_message_bytes=1 << 20))
    assert batch_capacity(info, channel_limit=1 << 30) == 50
    assert batch_capacity(info, channel_limit=1 << 30, batch_size=7) == 7
    assert batch_capacity(info, channel_limit=2000) < 50
    unset = ratings_info(limits=Limits(max_batch_reports=0, max_message_bytes=0))
    assert 90 <= batch_capacity(unset, channel_limit=4000) < 100  # only the channel's 4000 bytes limit
    with pytest.raises(ValidationError, match="batch_size"):
        batch_capacity(info, channel_limit=1 << 30, batch_size=0)
    with pytest.raises(ValidationError, match="max_message_bytes"):
        batch_capacity(ratings_info(limits=Limits(max_message_bytes=60)), channel_limit=1 << 30)
