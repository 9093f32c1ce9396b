"""zero_optimizer.py SRC DST - a copy of checkpoint SRC with every optimizer.* tensor zeroed.

The copy is re-sealed with a valid checksum, so mnist-train accepts it: the
control of tests that show a run takes (--resume) or leaves (--init-from) the
optimizer's state. Exits 1 when SRC's optimizer state is zero already (the
comparison would show nothing).
"""
import json
import struct
import sys
import zlib

blob = bytearray(open(sys.argv[1], "rb").read())
(n,) = struct.unpack("<Q", blob[:8])
hdr = json.loads(blob[8:8 + n])
zeroed = 0
for name, t in hdr.items():
    if name.startswith("optimizer."):
        b, e = t["data_offsets"]
        zeroed += any(blob[8 + n + b:8 + n + e])
        blob[8 + n + b:8 + n + e] = bytes(e - b)
if not zeroed:
    sys.exit("the checkpoint's optimizer state is zero already: the comparison would show nothing")
want = hdr["__metadata__"]["checksum"]
at = blob.find(b'"checksum":"' + want.encode()) + len('"checksum":"crc32:')
blob[at:at + 8] = b"00000000"
blob[at:at + 8] = b"%08x" % (zlib.crc32(bytes(blob)) & 0xFFFFFFFF)
open(sys.argv[2], "wb").write(blob)
