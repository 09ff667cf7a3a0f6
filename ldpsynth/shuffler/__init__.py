"""The shuffler tier (``ldpsynth shuffler serve``; docs/contract.md §16, design §9): the middle party of
encode-shuffle-analyze (Prochlo). Devices send it reports sealed to the aggregator's key
(``ShufflerService.SubmitSealed``); it pools them per collection across devices
(:mod:`~ldpsynth.shuffler.pools`), releases a pool only at a randomized threshold
(:mod:`~ldpsynth.shuffler.threshold`), permutes it uniformly (:mod:`~ldpsynth.shuffler.permutation`),
strips everything of the devices' calls, and forwards it to the replicas' ``SubmitShuffled`` under its
own credential (:mod:`~ldpsynth.shuffler.forward`). It learns each collection from the replicas
(:mod:`~ldpsynth.shuffler.directory`) and keeps no state: a device is acknowledged only once the
replicas acknowledged the batch that held its reports, so a killed shuffler loses nothing that was
acknowledged, and any number of shufflers can serve side by side (:mod:`~ldpsynth.shuffler.server`).
"""
