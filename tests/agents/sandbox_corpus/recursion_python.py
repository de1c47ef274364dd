# expect: stop_reason=error; exit_code=1; stderr_contains=RecursionError
# modes: bwrap unsafe
def f(n):
    return f(n + 1)


f(0)
