"""The measurement core: one configuration measured once (:mod:`.engine`), many in interleaved rounds of fresh
processes (:mod:`.runner`, :mod:`.worker`), clocks and intervals (:mod:`.timing`), the machine's state
(:mod:`.telemetry`, :mod:`.energy`), whether numbers reproduce (:mod:`.reproducibility`), and what a step
costs (:mod:`.flops`, :mod:`.traffic`). It imports no experiment family and not the analysis."""
