"""Fakes and helpers shared by unit test modules, so no test module imports another."""
