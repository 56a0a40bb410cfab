"""Process plumbing every package may use: the SPECWATCH_* environment (common/settings.py) and the redaction of
secrets from logs and error messages (common/redact.py).

It imports only the standard library and none of the repo's packages, so storage/ and alerts/ use it without
reaching into agent/.
"""
