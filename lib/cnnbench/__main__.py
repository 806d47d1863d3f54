"""``python -m cnnbench``: the same command line as ``cnnbench`` (:func:`cnnbench.pipeline.main`)."""

import sys

from cnnbench.pipeline import main

sys.exit(main())
