"""The measurement core: one configuration (:mod:`.engine`), many in rounds of fresh processes (:mod:`.runner`,
:mod:`.worker`), clocks (:mod:`.timing`), the machine's state (:mod:`.telemetry`, :mod:`.energy`), reproduction
(:mod:`.reproducibility`) and a step's costs (:mod:`.flops`, :mod:`.traffic`); no experiment family."""
