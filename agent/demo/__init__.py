"""`specwatch demo`: the sidecar in-process over real decoding, a target update mid-run, and a re-distilled
draft restoring speculation where it pays again."""
