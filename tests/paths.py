"""Where the tests find the repository and the paper's reference data (``../shared/reference``)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO.parent / "shared" / "reference"
