"""Puts tests/verify on sys.path (pytest's prepend import mode adds a conftest's folder), so test files in
subfolders (redteam/) can import the shared helper hack_names."""
