"""Hardware models: kernels on one GPU, collectives on the network tiers, topology and N-dimensional networks."""
