"""extraction-audit: training-data extraction audits for language models on Spark + Delta."""

__version__ = "0.1.0"
