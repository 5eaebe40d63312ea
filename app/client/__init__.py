"""The Python SDK for queue managers and servers."""

from app.client.connection import WlmError
from app.client.queue_manager import QueueManager
from app.client.server import Server, install_signal_handlers

__all__ = ["QueueManager", "Server", "WlmError", "install_signal_handlers"]
