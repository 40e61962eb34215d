"""Writes of sessions and messages, one module a concern. Other apps write these tables only here."""
