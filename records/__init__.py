"""The record contracts every package reads: StepRecord (the one record type, from the decoder to storage,
policies and alerts), RecordError, the bounds no store setting widens, and the helpers over a record.

They sit below agent/, storage/, alerts/ and policies/ and import none of them (stdlib only), so each of those
can read a record without reaching into another. Defined in records/records.py; patch bounds such as
MAX_STEPS there, where the functions read them.
"""

from records.records import *  # noqa: F403 (the names of records.records.__all__)
from records.records import __all__  # noqa: F401
