"""Per-message records, trial metadata and results folders (format-versioned)."""
