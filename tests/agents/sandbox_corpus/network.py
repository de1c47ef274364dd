# expect: ok; stdout_not_contains=CONNECTED; stdout_not_contains=SENT; listener_idle
# modes: bwrap unsafe
# The test listens on 127.0.0.1 (TCP and UDP); try to reach it, and to open any socket at all.
import socket

for family, kind in (
    (socket.AF_INET, socket.SOCK_STREAM),
    (socket.AF_INET, socket.SOCK_DGRAM),
    (socket.AF_INET6, socket.SOCK_STREAM),
    (socket.AF_UNIX, socket.SOCK_STREAM),
    (socket.AF_NETLINK, socket.SOCK_RAW),
):
    try:
        s = socket.socket(family, kind)
        print("socket opened", family, kind)
    except OSError as err:
        print("socket refused", family, kind, err)
try:
    socket.create_connection(("127.0.0.1", int("@PORT@")), timeout=2)
    print("CONNECTED")
except OSError as err:
    print("connect:", err)
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"hello", ("127.0.0.1", int("@UDP_PORT@")))
    print("SENT")
except OSError as err:
    print("udp:", err)
try:
    a, b = socket.socketpair()
    print("socketpair opened")
except OSError as err:
    print("socketpair:", err)
