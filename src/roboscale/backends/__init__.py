"""Middleware backends behind one protocol; each is imported only when chosen."""
