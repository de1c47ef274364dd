# expect: ok; stdout_not_contains=CONNECTED; stdout_not_contains=RESOLVED; listener_idle
# expect: stdout_contains=clients refused 9 of 9
# modes: bwrap unsafe
# The standard library's higher-level network clients aimed at the test's listener on 127.0.0.1,
# and DNS lookups: none may reach anything.
import asyncio
import ftplib
import http.client
import smtplib
import socket
import urllib.request
import xmlrpc.client

port = int("@PORT@")


async def open_connection():
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.close()


clients = {
    "urllib": lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1),
    "http.client": lambda: http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/"),
    "smtplib": lambda: smtplib.SMTP("127.0.0.1", port, timeout=1),
    "ftplib": lambda: ftplib.FTP().connect("127.0.0.1", port, timeout=1),
    "asyncio": lambda: asyncio.run(asyncio.wait_for(open_connection(), 1)),
    "create_connection": lambda: socket.create_connection(("127.0.0.1", port), timeout=1),
    "xmlrpc": lambda: xmlrpc.client.ServerProxy(f"http://127.0.0.1:{port}/").system.listMethods(),
}
refused = 0
for name, call in clients.items():
    try:
        call()
        print("CONNECTED", name)
    except Exception as err:  # noqa: BLE001 - any failure is a refusal
        refused += 1
        print("refused", name, type(err).__name__, err)
for host in ("localhost.gf2-probe.example.com", "pypi.org"):
    try:
        print("RESOLVED", host, socket.getaddrinfo(host, 80))
    except Exception as err:  # noqa: BLE001
        refused += 1
        print("lookup failed", host, type(err).__name__, err)
print(f"clients refused {refused} of {len(clients) + 2}")
