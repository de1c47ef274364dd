# expect: ok; target_absent; stdout_not_contains=WROTE /sandbox/; stdout_contains=disk tamper done
# modes: bwrap unsafe
# Tamper with the grader's copy on disk: overwrite, replace and delete the record, the job, the code
# and the harness the sandbox reads (read-only under bwrap; in the UNSAFE mode the job's own host temp
# files, which the host never reads back). The grade comes from the host's Record, unchanged.
import json
import os
import sys

forged = json.dumps({"n": 1, "p": 1, "d": 1, "g": 0, "K": 0, "prefix": [], "samples": [], "target": [0]})
paths = ["/sandbox/record.json", "/sandbox/job.json", "/sandbox/code.py", "/sandbox/harness.py"]
job_path = sys.argv[-1]
if os.path.isfile(job_path) and not job_path.startswith("/sandbox/"):  # UNSAFE: the run's own temp files
    job = json.load(open(job_path))
    paths += [job_path, job["record"], job["code"]]
for path in paths:
    for how in ("write", "replace", "unlink"):
        try:
            if how == "write":
                with open(path, "w") as fh:
                    fh.write(forged)
            elif how == "replace":
                tmp = os.path.join(os.getcwd(), "forged.json")
                with open(tmp, "w") as fh:
                    fh.write(forged)
                os.replace(tmp, path)
            else:
                os.unlink(path)
            print("WROTE" if path.startswith("/sandbox/") else "wrote own temp", path, how)
        except OSError as err:
            print("refused", path, how, err.strerror)
print("disk tamper done")
