"""The survey demo in a browser (``ldpsynth simulate --web``, ``make demo-web``).

A replica (``ldpsynth aggregator serve`` in a subprocess, a temporary data directory, a web port that
allows only the demo's pages) collects the ``survey`` collection: one row per rating, the item public,
the rating (1-5) private. A static server on 127.0.0.1 serves two pages and the SDK's browser bundle:

* ``/survey.html``: a person rates the items; the page perturbs each rating with mechanism E in the
  browser (``@ldpsynth/sdk/web``: the device's ledger in IndexedDB) and submits the batch to the
  replica's web port (the Connect protocol). "Another person" starts a new device ledger.
* ``/analyst.html``: the analyst's live answers, polled every second from ``/answers.json``: for each
  item the number of ratings (public, exact) and the debiased count of each rating with its 95 %
  interval, from the replica's query service (:class:`~ldpsynth.client.query.QueryClient`), as a chart.

The pages and the bundle come from the TypeScript SDK's folder (``sdk/typescript/demo/`` and
``sdk/typescript/dist/browser/``, built by ``npm run build:browser``).
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.queries.builders import grouped
from ldpsynth.shared.schema import Schema
from ldpsynth.simulation.local_cluster import ServerProcess

ITEMS = ("espresso", "green tea", "hot chocolate", "lemonade")
RATINGS = (1, 2, 3, 4, 5)
#: ε per rating: with 5 ratings, a rating is kept with probability e^2 / (e^2 + 4) = 0.65.
EPSILON = 2.0
SURVEY = Schema.from_json({
    "name": "survey", "epsilon": EPSILON,
    "attributes": [{"name": "item", "type": "categorical", "values": list(ITEMS), "public": True},
                   {"name": "rating", "type": "integer", "min": RATINGS[0], "max": RATINGS[-1]}]})
#: The SDK's folder in a source tree (the pages and the bundle are not part of the Python package).
SDK_DIR = Path(__file__).resolve().parents[2] / "sdk" / "typescript"
BUNDLE = Path("dist") / "browser" / "ldpsynth-sdk-web.js"
PAGES = {"/survey.html": "text/html", "/analyst.html": "text/html", "/survey.js": "text/javascript",
         "/analyst.js": "text/javascript", "/demo.css": "text/css"}
#: Seconds an answer is reused (the analyst's pages poll every second).
ANSWER_TTL = 0.5


def _queries() -> list[Any]:
    """Per item: its number of ratings (weights all 1), then the count of each rating."""
    queries = []
    for item in ITEMS:
        queries.append(grouped("item", {item: [1.0] * len(RATINGS)}, normalization="sum", label=f"{item}/n"))
        for r, _ in enumerate(RATINGS):
            weights = [1.0 if j == r else 0.0 for j in range(len(RATINGS))]
            queries.append(grouped("item", {item: weights}, normalization="sum", label=f"{item}/{r + 1}"))
    return queries


def answers(client: QueryClient) -> dict[str, Any]:
    """The analyst's answers as the chart draws them (``n`` 0 and no items before the first report)."""
    try:
        table = client.estimate(SURVEY.name, queries=_queries())
    except QueryError as exc:  # the query service refuses a collection without reports
        return {"n": 0, "level": 0.95, "epsilon": EPSILON, "items": [], "note": str(exc)}
    records = {record["label"]: record for record in table.records()}
    items = []
    for item in ITEMS:
        ratings = [{"rating": rating, "estimate": records[f"{item}/{rating}"]["estimate"],
                    "low": records[f"{item}/{rating}"]["ci_low"], "high": records[f"{item}/{rating}"]["ci_high"]}
                   for rating in RATINGS]
        items.append({"item": item, "responses": round(records[f"{item}/n"]["estimate"]), "ratings": ratings})
    return {"n": int(table.n), "level": float(table.level), "epsilon": float(table.epsilon), "items": items}


class _CachedAnswers:
    """:func:`answers`, computed at most once per :data:`ANSWER_TTL` seconds."""

    def __init__(self, compute: Callable[[], dict[str, Any]]):
        self._compute = compute
        self._lock = threading.Lock()
        self._at = -1.0
        self._value: dict[str, Any] = {}

    def get(self) -> dict[str, Any]:
        with self._lock:
            if time.monotonic() - self._at > ANSWER_TTL:
                self._value = self._compute()
                self._at = time.monotonic()
            return self._value


def _handler(files: dict[str, tuple[str, bytes]], dynamic: dict[str, Callable[[], dict[str, Any]]]
             ) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/":
                self.send_response(302)
                self.send_header("location", "/survey.html")
                self.end_headers()
                return
            if path in dynamic:
                body, kind = json.dumps(dynamic[path]()).encode(), "application/json"
            elif path in files:
                kind, body = files[path]
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.send_header("cache-control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the demo prints its own lines."""

    return Handler


def _assets(sdk_dir: Path) -> dict[str, tuple[str, bytes]]:
    bundle = sdk_dir / BUNDLE
    if not bundle.is_file():
        raise ValidationError("--web", f"the SDK's browser bundle at {bundle} (build it: make demo-web, or "
                                       "npm ci && npm run build:browser in sdk/typescript)", "missing")
    files = {"/sdk.js": ("text/javascript", bundle.read_bytes())}
    for path, kind in PAGES.items():
        files[path] = (kind, (sdk_dir / "demo" / path.lstrip("/")).read_bytes())
    return files


class WebDemo:
    """The demo's replica and page server; :meth:`start`, then :meth:`stop`."""

    def __init__(self, port: int = 0, web_port: int = 0, sdk_dir: Path = SDK_DIR, data_dir: Path | None = None):
        self._files = _assets(sdk_dir)
        self._port = port
        self._web_port = web_port
        self._scratch = tempfile.TemporaryDirectory(prefix="ldpsynth-web-demo-")
        self._data_dir = data_dir or Path(self._scratch.name) / "data"
        self.replica: ServerProcess | None = None
        self._http: ThreadingHTTPServer | None = None
        self._client: QueryClient | None = None
        self.origin = ""

    def start(self) -> dict[str, str]:
        """Start the page server and the replica; the URLs to open."""
        config: dict[str, Any] = {}
        cached = _CachedAnswers(lambda: answers(self._query_client()))
        self._http = ThreadingHTTPServer(("127.0.0.1", self._port),
                                         _handler(self._files, {"/answers.json": cached.get,
                                                                "/config.json": lambda: config}))
        self.origin = f"http://127.0.0.1:{self._http.server_address[1]}"
        collection = Path(self._scratch.name) / "survey.json"
        collection.write_text(SURVEY.dumps())
        self.replica = ServerProcess.aggregator(
            ["--data-dir", str(self._data_dir), "--collection", str(collection), "--host", "127.0.0.1", "--port", "0",
             "--shards", "1", "--web-port", str(self._web_port), "--web-origins", self.origin, "--grace", "1"],
            Path(self._scratch.name) / "aggregator.log")
        config.update({"webUrl": f"http://{self.replica.web_address}", "collection": SURVEY.name,
                       "items": list(ITEMS), "ratings": list(RATINGS), "epsilon": EPSILON})
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return {"survey": f"{self.origin}/survey.html", "analyst": f"{self.origin}/analyst.html",
                "web_url": config["webUrl"], "aggregator": self.replica.address}

    def _query_client(self) -> QueryClient:
        if self._client is None:
            assert self.replica is not None
            self._client = QueryClient(self.replica.address)
        return self._client

    def stop(self) -> int:
        """Stop the page server, then the replica (gracefully); the replica's exit code."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._client is not None:
            self._client.close()
        code = self.replica.terminate() if self.replica is not None else 0
        self._scratch.cleanup()
        return code
