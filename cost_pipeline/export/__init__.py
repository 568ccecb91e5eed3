"""Datasets written for tools outside the pipeline (FOCUS for FinOps tools)."""
