"""Access control: principals with roles, hashed API keys, and SAF-style permits for server connects."""
