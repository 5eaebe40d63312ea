"""Runnable example servers."""
