"""Specs: what is trained (ModelSpec), on what (ClusterSpec), and how (Strategy)."""

from autoplan.specs.cluster import ClusterSpec, GPUSpec, NetworkTier, load_cluster, list_clusters
from autoplan.specs.model import ModelSpec
from autoplan.specs.catalog import get_model, list_models, load_model
from autoplan.specs.strategy import Strategy, violations

__all__ = [
    "ClusterSpec", "GPUSpec", "NetworkTier", "ModelSpec", "Strategy",
    "get_model", "list_models", "load_model", "load_cluster", "list_clusters", "violations",
]
