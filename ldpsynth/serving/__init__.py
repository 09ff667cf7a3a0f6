"""What every tier that serves gRPC calls shares (the aggregator's replicas and the shuffler): the one
error-to-status mapping (:mod:`~ldpsynth.serving.status`) and who is calling (:mod:`~ldpsynth.serving.auth`)."""
