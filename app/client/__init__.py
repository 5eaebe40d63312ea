"""The Python SDK for queue managers and servers."""

from app.client.connection import WlmError
from app.client.queue_manager import QueueManager
from app.client.server import DeadLetter, Server, install_signal_handlers

__all__ = ["DeadLetter", "QueueManager", "Server", "WlmError", "install_signal_handlers"]
