"""feedback-insights: agent feedback in, clustered demand and drafted fixes out."""

__version__ = "0.1.0"
