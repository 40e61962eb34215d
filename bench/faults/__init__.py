"""What survives a crash or an outage? Every fault of the operator's table on both deploy paths, and
a hung broker under API load."""
