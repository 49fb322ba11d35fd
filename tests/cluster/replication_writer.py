"""Writer and reader of the replication kill test on `cluster up --hosts N`
(host_replication_test.cc), run inside a host against a FUSE mount.

write MOUNT SECONDS: writes files f0, f1, ... (open, write, fsync, close);
prints "ack I" for each whose fsync and close returned, "werr I MSG" for the
others; between writes reads an acknowledged file back ("rerr I MSG" when the
read fails or differs). Ends with "longest_write_ms X", "longest_read_ms Y",
"reads N".
verify MOUNT I...: reads each file back; prints "bad I MSG" for each that
fails or differs, then "verified N".
"""
import os
import sys
import time

SIZE = 192 * 1024
# At most this many writes a second: the test spans failure detection, not
# the pool's capacity (an unpaced writer on an idle machine fills it).
PACE_S = 0.02


def content(i):
    line = ("file-%d " % i).encode()
    return (line * (SIZE // len(line) + 1))[:SIZE]


def read_back(path, i):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return str(e)
    return "" if data == content(i) else "differs (%d bytes)" % len(data)


def write(mount, seconds):
    end = time.monotonic() + seconds
    acked, longest_w, longest_r, reads, i = [], 0.0, 0.0, 0, 0
    while time.monotonic() < end:
        t = time.monotonic()
        try:
            fd = os.open("%s/f%d" % (mount, i), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            try:
                os.write(fd, content(i))
                os.fsync(fd)
            finally:
                os.close(fd)
            acked.append(i)
            print("ack %d" % i, flush=True)
        except OSError as e:
            print("werr %d %s" % (i, e), flush=True)
        longest_w = max(longest_w, (time.monotonic() - t) * 1000)
        if acked:
            j = acked[(i * 7919) % len(acked)]
            t = time.monotonic()
            err = read_back("%s/f%d" % (mount, j), j)
            longest_r = max(longest_r, (time.monotonic() - t) * 1000)
            reads += 1
            if err:
                print("rerr %d %s" % (j, err), flush=True)
        i += 1
        time.sleep(max(0.0, PACE_S - (time.monotonic() - t)))
    print("longest_write_ms %.0f" % longest_w)
    print("longest_read_ms %.0f" % longest_r)
    print("reads %d" % reads)


def verify(mount, files):
    for i in files:
        err = read_back("%s/f%d" % (mount, i), i)
        if err:
            print("bad %d %s" % (i, err))
    print("verified %d" % len(files))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], float(sys.argv[3]))
    else:
        verify(sys.argv[2], [int(x) for x in sys.argv[3:]])
