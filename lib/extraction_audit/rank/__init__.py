"""Corpus-free route: membership scores, near-duplicate collapse, ranking, human review,
and calibration against the corpus route.  Formulas in ``scores.py``."""

from .calibration import calibrate
from .candidates import run_rank
from .review import confirmed_among_checked, export_review, import_review
from .scores import SCORES

__all__ = ["SCORES", "calibrate", "confirmed_among_checked", "export_review", "import_review", "run_rank"]
