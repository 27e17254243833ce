"""The CLI layer: one module per command, each parsing options and calling one library function."""
