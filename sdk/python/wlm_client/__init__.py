"""The Python SDK for queue managers and servers of the WLM service."""

from wlm_client.iwm_connection import WlmError
from wlm_client.queue_manager import QueueManager
from wlm_client.server import DeadLetter, Server, install_signal_handlers

__all__ = ["DeadLetter", "QueueManager", "Server", "WlmError", "install_signal_handlers"]
