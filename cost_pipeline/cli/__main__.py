"""`python -m cost_pipeline.cli …` is the `cost-pipeline` command."""

import sys

from cost_pipeline.cli.main import run

sys.exit(run())
