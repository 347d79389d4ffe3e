"""Tests that commit (concurrent turns on real pools) use `own_pg_url` (tests/conftest.py):
a PostgreSQL database of their own."""
