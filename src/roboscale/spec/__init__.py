"""Experiment specs: typed schema, YAML loading with line numbers, validation, planning."""
