"""What every package of specwatch reads, below all of them: the record contracts (specwatch_core/records.py:
StepRecord, the one record type from the decoder to storage, policies and alerts, with RecordError and the
bounds no store setting widens), the SPECWATCH_* environment (specwatch_core/settings.py), the redaction of
secrets from logs and error messages (specwatch_core/redact.py) and a file's sha256 (specwatch_core/files.py).

It imports only the standard library and none of the repo's packages, so agent/, storage/, alerts/ and
policies/ each use it without reaching into another. Patch bounds such as MAX_STEPS in
specwatch_core/records.py, where the functions read them.
"""
