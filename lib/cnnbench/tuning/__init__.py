"""The fastest way to train a model on this device: a budgeted search over every knob the hardware supports,
raced by successive halving, guarded for correctness, confirmed with the full protocol, and explained on the
roofline. ``tune(run)`` writes ``tuning.csv`` and ``tuning_space.csv``; ``best``, ``beside_published``,
``race``, ``skipped``, ``notes``, ``findings`` and ``plot`` present them."""

from cnnbench.tuning.experiment import tune
from cnnbench.tuning.summary import beside_published, best, findings, notes, plot, race, skipped

__all__ = ["tune", "best", "beside_published", "race", "skipped", "notes", "findings", "plot"]
