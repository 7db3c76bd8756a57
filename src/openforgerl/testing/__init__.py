"""Test doubles that speak real wire protocols (used by the test suite and by local demos)."""
