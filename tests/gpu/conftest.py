"""GPU suites: they run where ACCL was built with the CUDA executor
(ACCL_DEVICE_KERNELS=ON) and a GPU is visible, and skip cleanly elsewhere."""
import pytest

import accl


def pytest_collection_modifyitems(config, items):
    on_gpu, reason = accl.query_mode()
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if not on_gpu:
                item.add_marker(pytest.mark.skip(reason=f"no device mode here: {reason}"))
