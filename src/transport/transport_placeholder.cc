// Replaced by the bootstrap and UCX sources.
