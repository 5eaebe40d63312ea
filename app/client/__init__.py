"""The Python SDK for queue managers and servers."""

from app.client.sdk import QueueManager, Server, WlmError, install_signal_handlers

__all__ = ["QueueManager", "Server", "WlmError", "install_signal_handlers"]
