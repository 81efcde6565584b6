"""Test doubles for the hardware (fake pynvml, fake nvidia-smi) and fixture helpers."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def fixture_bytes(*parts):
    return FIXTURES.joinpath(*parts).read_bytes()
