"""Log events: every line has an event name and named fields, written as JSON lines or as text.

``log = events.get(__name__)``, then ``log.info("shard.restored", "shard 3 restored ...", shard=3)``:
the text is what a person reads (the text format prints it as the lines always were); the event
name and the fields are what a machine reads (the JSON format prints them, with the text as
``message``). Lines of the libraries underneath (Ray, nats-py, gRPC) go through the same formatter
as the event ``log``.

The standard library's ``logging`` with a JSON formatter rather than structlog: Ray, nats-py and
gRPC log through ``logging``, so one formatter renders every line of a process, the shard
workers' processes included, with no second pipeline to configure and no new dependency.

Privacy (docs/deployment.md, "Monitoring and alerts"): fields hold counts, names of collections,
shard numbers, statuses and durations; never a token, a peer address, a report id or a report's
value. Callers pass only such fields; :data:`FORBIDDEN_FIELDS` are refused outright so that no call
can slip one in by name.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

#: Field names no event may carry (what a device or a credential is, or what it sent).
FORBIDDEN_FIELDS = frozenset({"token", "peer", "report_id", "report_ids", "value", "values", "private_code",
                              "private_codes"})
#: ``--log-format`` choices.
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_EXTRA = "ldpsynth_event"


class EventLogger:
    """A :class:`logging.Logger` that logs events (see the module docstring)."""

    def __init__(self, name: str):
        self.logger = logging.getLogger(name)

    def log(self, level: int, event: str, text: str, exc_info: BaseException | None = None, **fields: Any) -> None:
        bad = FORBIDDEN_FIELDS.intersection(fields)
        if bad:
            raise ValueError(f"log event {event!r}: fields {sorted(bad)} may not be logged")
        if self.logger.isEnabledFor(level):
            self.logger.log(level, "%s", text, exc_info=exc_info, extra={_EXTRA: (event, fields)})

    def info(self, event: str, text: str, **fields: Any) -> None:
        self.log(logging.INFO, event, text, **fields)

    def warning(self, event: str, text: str, **fields: Any) -> None:
        self.log(logging.WARNING, event, text, **fields)

    def error(self, event: str, text: str, exc_info: BaseException | None = None, **fields: Any) -> None:
        self.log(logging.ERROR, event, text, exc_info=exc_info, **fields)


def get(name: str) -> EventLogger:
    """The event logger of module ``name``."""
    return EventLogger(name)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (RFC 3339, UTC), ``level``, ``logger``, ``event``, ``message``,
    the event's fields, and ``exception`` (the traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        event, fields = getattr(record, _EXTRA, ("log", {}))
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name, "event": event,
            "message": record.getMessage()}
        out.update({key: value for key, value in fields.items() if key not in out})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure(log_format: str, level: int = logging.INFO, stream: TextIO | None = None, force: bool = False) -> None:
    """Send every log line of this process to ``stream`` (default stderr) in ``log_format`` ("text" or
    "json"). As :func:`logging.basicConfig`: nothing changes if the root logger has handlers already
    (a host that configured logging, a test runner), unless ``force`` replaces them."""
    if log_format not in FORMATS:
        raise ValueError(f"--log-format: one of {', '.join(FORMATS)}, got {log_format!r}")
    root = logging.getLogger()
    if root.handlers and not force:
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
