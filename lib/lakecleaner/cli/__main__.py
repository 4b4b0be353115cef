"""`python -m lakecleaner.cli`."""

from lakecleaner.cli.main import main

main()
