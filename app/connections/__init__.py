"""IWM4CON / IWM4DIS: queue managers and servers connect, heartbeat and disconnect."""
