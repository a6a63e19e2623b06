import worker
from worker import _core


def test_extension_version_matches_package():
    assert _core.__version__ == worker.__version__
