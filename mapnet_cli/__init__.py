"""mapnet: variance-reduced MLM pretraining."""

__version__ = "0.1.0"
