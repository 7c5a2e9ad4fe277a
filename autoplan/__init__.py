"""autoplan: find the best parallel plan for training a large model, offline."""

__version__ = "0.1.0"
