"""``ldpsynth simulate --collection FILE`` for the collection modes beyond one mechanism card: a wide
collection (:mod:`.wide`), a numeric one (:mod:`.numeric`) and a discovery of heavy hitters (:mod:`.discovery`),
each run end to end on a hosted aggregator with simulated devices (:mod:`.run`)."""
