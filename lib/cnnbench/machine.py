"""00's one entry point: the machine a run measures on and the parameters in force, shown as tables.

readable_display()   pandas display options the notebooks' tables read well with (:mod:`cnnbench.tables`)
environment(env)     the machine, software and device of ``run.environment()`` (:func:`cnnbench.envinfo.table`)
parameters(params)   every key of the resolved parameters with its value (:func:`cnnbench.params.table`)"""

from __future__ import annotations

from cnnbench.envinfo import table as environment
from cnnbench.params import table as parameters
from cnnbench.tables import readable_display

__all__ = ["readable_display", "environment", "parameters"]
