"""Calibration: measure a cluster (``autoplan profile``) and fit a cluster spec's physical constants to measurements
(``autoplan calibrate``).

Every other autoplan module is reached through ``autoplan.calibrate.model`` only, so that moving the cost models
(``autoplan/cost`` → ``autoplan/hardware`` and ``autoplan/families``) changes one import block. ``torch`` is imported
only by ``autoplan.calibrate.profile`` and only when a profile runs.
"""
