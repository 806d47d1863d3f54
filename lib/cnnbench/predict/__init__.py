"""What would a model do on a device you don't have (issue 32): each op's FLOPs and bytes against the device's roofs
at fitted efficiencies (:mod:`.model`), scored out of sample against every published and measured rate (:mod:`.score`)."""

from cnnbench.predict.score import Refused, figure, goals, main, one, table, what_if

__all__ = ["Refused", "figure", "goals", "main", "one", "table", "what_if"]
