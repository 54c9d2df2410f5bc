"""ctest's entry to the Python package's tests: pytest over this folder, or exit code 77 (skipped)
naming what is missing."""
import os
import sys

try:
    import pytest
except ImportError:
    print("skipped: pytest is not installed (Debian python3-pytest)")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rs", here]))
