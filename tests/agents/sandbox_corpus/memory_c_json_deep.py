# expect: stop_reason=error; exit_code=1; stderr_contains=RecursionError; wall_max=1.5
# modes: bwrap unsafe
# json.loads of a document nested a million deep: the C decoder's recursion check stops it.
import json

doc = json.loads("[" * 10**6 + "]" * 10**6)
print(type(doc))
