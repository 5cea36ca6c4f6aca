import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import os
import tempfile

# Compile each model once per test run: identical compiles reuse the cached build.
os.environ.setdefault("BRAZE_CACHE_DIR", tempfile.mkdtemp(prefix="braze-test-cache-"))
# Any disagreement between braze's and onnx's shape inference fails the import.
os.environ.setdefault("BRAZE_STRICT_SHAPES", "1")
