"""Hand-written encoders for the hot responses (Produce, Fetch).

kio's writers are pure Python with a large fixed cost per message; these encoders write the
same bytes with ``struct`` and keep record blobs as separate chunks so log bytes are never
copied into a new buffer. tests/unit/protocol/test_encoders_parity.py proves byte-identical
output to kio for every version served.
"""
