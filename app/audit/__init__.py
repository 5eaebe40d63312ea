"""Audit trail: who changed what, when (policy installs, keys, operator commands)."""
