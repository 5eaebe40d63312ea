"""Small utilities the domains share, knowing no domain: per-process caches whose entries expire, wildcard
matching, failures of a loop logged when they start and clear, and Pydantic building blocks."""
