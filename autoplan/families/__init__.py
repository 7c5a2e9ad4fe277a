"""Model families: each a package holding its knobs, costs, memory, validity, catalog entries and export.

A family package ``families/<name>/`` has ``knobs.py`` (``PARTS``: its part of the plan), ``family.py``
(``FAMILIES``: the ``base.ModelFamily`` implementations it registers) and ``catalog.py`` (``MODELS``, ``ALIASES``).
It imports ``specs``, ``hardware`` and the family interface (``base.py``, ``costs.py``), never another family.
Adding a family is its package plus one entry in ``PACKAGES``. This module stays light: the composed plan is in
``strategy.py``, the registry in ``registry.py``.
"""

PACKAGES = ("transformer", "cnn", "dlrm")
"""The family packages, in registration order (their knobs join the plan in this order)."""
