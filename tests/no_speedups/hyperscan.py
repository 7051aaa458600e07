"""Put first on PYTHONPATH (scripts/test.sh's second pass): `import hyperscan` fails, as where the
optional speed-up is not installed, so that the code's fallback is what runs."""

raise ModuleNotFoundError("hyperscan is blocked for the fallback pass (tests/no_speedups)")
