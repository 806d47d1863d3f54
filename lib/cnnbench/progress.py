"""Progress bars on every loop a person waits for; quiet when the pipeline runs headless."""

from __future__ import annotations

import os

from tqdm.auto import tqdm


def headless() -> bool:
    return os.environ.get("CNNBENCH_HEADLESS") == "1"


def bar(iterable=None, **kwargs):
    """``tqdm`` that stays silent under the pipeline (``CNNBENCH_HEADLESS=1``)."""
    kwargs["disable"] = kwargs.get("disable", False) or headless()
    kwargs.setdefault("leave", False)
    return tqdm(iterable, **kwargs)
