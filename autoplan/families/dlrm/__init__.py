"""Deep learning recommendation models: data-parallel MLPs and sharded embedding tables, the TorchRec way."""
