"""The command line: `cost-pipeline demo | materialize | estimate | report`."""

from cost_pipeline.cli.main import main, run

__all__ = ["main", "run"]
