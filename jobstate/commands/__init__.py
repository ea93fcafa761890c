"""One module per ``jobstate`` subcommand; each function takes parsed values and returns an exit code."""
