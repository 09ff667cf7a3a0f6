"""What every tier that serves gRPC calls shares (the aggregator's replicas and the shuffler): the
errors that end a request (:mod:`~ldpsynth.serving.errors`), the one error-to-status mapping
(:mod:`~ldpsynth.serving.status`), who is calling (:mod:`~ldpsynth.serving.auth`), TLS
(:mod:`~ldpsynth.serving.tls`), and what every serving process records: log events, metrics, traces
(:mod:`~ldpsynth.serving.observe`)."""
