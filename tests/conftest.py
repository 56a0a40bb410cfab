import sys
from pathlib import Path

# tests/ holds shared helpers (tiny_models) imported by test modules in sub-folders.
sys.path.insert(0, str(Path(__file__).parent))
