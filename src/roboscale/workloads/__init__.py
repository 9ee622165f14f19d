"""Node programs and topologies. Stdlib only: they also run in ros1's system Python."""
