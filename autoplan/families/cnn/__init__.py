"""Convolutional networks under data, spatial, channel, filter and pipeline parallelism."""
