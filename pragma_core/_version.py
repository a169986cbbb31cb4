"""The version of pragma-core, in a leaf module every part can import without importing the package's API."""

__version__ = "0.1.0"
