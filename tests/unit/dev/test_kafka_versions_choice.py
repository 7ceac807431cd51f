"""Which broker releases the dev stack runs: the pom's default is one of them, anything else is one clear line."""

import pytest

from vigil_dev.errors import DevError
from vigil_dev.kafka import install


def test_the_default_is_the_pom_s_and_is_supported() -> None:
    assert install.pinned_version() == install.SUPPORTED_VERSIONS[0]
    assert install.check_version(install.pinned_version()) == install.pinned_version()


@pytest.mark.parametrize("version", ["4.1.1", "3.9", "", "latest", "4.4.0 "])
def test_an_unsupported_release_is_one_line_naming_the_supported_ones(version: str) -> None:
    with pytest.raises(DevError) as refused:
        install.check_version(version)
    message = str(refused.value)
    assert "\n" not in message
    assert message == f"Kafka {version!r} is not a release the dev stack runs: one of 4.4.0, 3.9.1"
