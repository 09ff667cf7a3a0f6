"""The replicated log's names and settings, with no NATS in them: how to reach the servers
(:class:`LogSettings`), the layout a deployment's log is fixed to and what it names (streams,
subjects, the snapshot store), and the log's errors.

The **layout** (KV bucket ``LDPSYNTH``, key ``layout``) is a random id, the shard count and the
replication factor, fixed when the first replica starts. Reports are routed to shards by id, so the
shard count can never change; every stream, record and snapshot names the layout it belongs to and is
refused under another (:mod:`~ldpsynth.aggregator.storage.jetstream` opens it).
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass

from ldpsynth.shared.errors import LdpsynthError

META_BUCKET = "LDPSYNTH"
LAYOUT_KEY = "layout"
LAYOUT_FORMAT = "ldpsynth.layout/1"
#: Environment variable holding the NATS servers' authorization token, on replicas and on every Ray
#: node that runs shard workers (never a flag: it would show in ``ps``; never an actor argument: it
#: would be kept in Ray's GCS).
TOKEN_ENV = "LDPSYNTH_NATS_TOKEN"


class LogUnavailable(LdpsynthError):
    """The log could not be reached, or an append's outcome is unknown (retry)."""


class LogFull(LdpsynthError):
    """The log's servers are out of storage (JetStream: insufficient resources, or a full disk):
    the append was refused and nothing was stored."""


class LogFenced(LdpsynthError):
    """An append was refused because the stream holds records this writer has not seen."""


class LayoutError(LdpsynthError):
    """The log's layout, streams or collection registry do not match what was asked for."""


@dataclass(frozen=True)
class LogSettings:
    """How to reach the NATS servers of the log.

    ``servers``: ``nats://HOST:PORT`` URLs (several: the client fails over between them);
    ``replicas``: copies of every stream (1 on one machine, 3 in a cluster); ``tls_ca`` /
    ``tls_cert`` / ``tls_key``: PEM files for TLS to the servers (``tls_cert`` + ``tls_key``:
    mutual TLS); ``token``: the servers' authorization token, if any (``None``: :data:`TOKEN_ENV`
    of this process's environment, if set).
    """

    servers: tuple[str, ...]
    replicas: int = 1
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    token: str | None = None
    timeout: float = 10.0

    def tls_context(self) -> ssl.SSLContext | None:
        if not (self.tls_ca or self.tls_cert):
            return None
        context = ssl.create_default_context(cafile=self.tls_ca)
        if self.tls_cert:
            context.load_cert_chain(self.tls_cert, self.tls_key)
        return context


@dataclass(frozen=True)
class Layout:
    """The fixed shape of a deployment's log."""

    id: str
    shards: int
    replicas: int

    def stream(self, shard: int) -> str:
        return f"LDPSYNTH_{self.id}_{shard:03d}"

    def subject(self, shard: int) -> str:
        return f"ldpsynth.{self.id}.{shard}"

    @property
    def snapshot_bucket(self) -> str:
        return f"LDPSYNTH_{self.id}_SNAP"

    def to_json(self, state: str) -> bytes:
        return json.dumps({"format": LAYOUT_FORMAT, "id": self.id, "shards": self.shards, "replicas": self.replicas,
                           "state": state}, sort_keys=True).encode("utf-8")


@dataclass(frozen=True)
class StreamState:
    first: int
    last: int
    messages: int
    deleted: int


def layout_from(raw: bytes) -> tuple[Layout, str]:
    """The layout and its state (``creating`` or ``ready``) stored under :data:`LAYOUT_KEY`."""
    try:
        obj = json.loads(raw)
        if obj["format"] != LAYOUT_FORMAT:
            raise ValueError
        return Layout(str(obj["id"]), int(obj["shards"]), int(obj["replicas"])), str(obj["state"])
    except (ValueError, KeyError, TypeError):
        raise LayoutError(f"KV {META_BUCKET}/{LAYOUT_KEY}: not an ldpsynth layout") from None
