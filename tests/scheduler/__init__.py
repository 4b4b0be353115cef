"""Tests under a real Airflow scheduler, sharing one LocalAirflow (see conftest.py)."""
