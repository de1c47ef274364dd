# expect: ok; stdout_contains=scratch full; stdout_contains=tmp full
# limits: scratch_mb=8
# modes: bwrap
# /scratch and /tmp are size-capped tmpfs: filling them ends in ENOSPC, not in host memory or disk.
import errno

for where, label in (("/scratch", "scratch"), ("/tmp", "tmp")):
    try:
        for i in range(100):
            with open(f"{where}/fill{i}", "wb") as fh:
                fh.write(b"x" * (1 << 20))
        print("FILLED", where)
    except OSError as err:
        assert err.errno == errno.ENOSPC, err
        print(label, "full after", i, "MiB")
