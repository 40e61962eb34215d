"""How much of what a question needs does a search, or the context block, find? LOCOMO recall, time
windows, compiled and consolidated memory, and the token estimate that sizes a block."""
