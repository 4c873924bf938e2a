"""Tests for aivault: real processes, sockets and databases."""
