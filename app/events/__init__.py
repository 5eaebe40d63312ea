"""Advisories: what happens, published to one Redis stream every replica reads, and served as GET /v1/events."""
