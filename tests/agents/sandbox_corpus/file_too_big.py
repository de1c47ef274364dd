# expect: stop_reason=error; stderr_contains=File too large; stdout_contains=wrote 16 MiB
# modes: bwrap unsafe
# A file in the working directory past RLIMIT_FSIZE (16 MiB).
with open("big.bin", "wb") as fh:
    for i in range(64):
        fh.write(b"x" * (1 << 20))
        fh.flush()
        if i == 15:
            print("wrote 16 MiB", flush=True)
