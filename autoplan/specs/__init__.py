"""Specs: what is trained (ModelSpec), on what (ClusterSpec), and the core plan every family shares (``plan.py``).

The full plan type, composed with every model family's knobs, is ``autoplan.families.strategy.Strategy``; the model
catalog is ``autoplan.families.catalog``."""

from autoplan.specs.cluster import ClusterSpec, GPUSpec, NetworkTier, load_cluster, list_clusters
from autoplan.specs.model import ModelSpec

__all__ = ["ClusterSpec", "GPUSpec", "NetworkTier", "ModelSpec", "load_cluster", "list_clusters"]
