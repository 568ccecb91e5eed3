"""The command line: `cost-pipeline demo | materialize | estimate | report`."""

from cost_pipeline.cli.main import main

__all__ = ["main"]
