"""The step ring: StepRecords from a decoding process to the sidecar through shared memory, and the
sidecar's decisions back, with no HTTP on the decoding thread.

``layout`` (the segment's layout, how to open it), ``client`` (the decoding process's end), ``deferred``
(the client with a packer thread, for CPU engines) and ``reader`` (the sidecar's end, ``specwatch serve
--ring``).
"""
