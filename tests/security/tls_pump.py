"""A TLS handshake between two in-memory ``ssl.SSLObject`` ends (no sockets, no threads):
bytes are pumped from one BIO to the other until both sides are done."""

from __future__ import annotations

import ssl


def handshake(
    server_context: ssl.SSLContext,
    client_context: ssl.SSLContext,
    server_hostname: str = "localhost",
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """The (server, client) ends after a completed handshake; raises ``ssl.SSLError``
    (from either side) when it fails."""
    bios = [ssl.MemoryBIO() for _ in range(4)]
    server = server_context.wrap_bio(bios[0], bios[1], server_side=True)
    client = client_context.wrap_bio(bios[2], bios[3], server_hostname=server_hostname)
    done = {"server": False, "client": False}
    for _ in range(50):
        for name, end in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        # client -> bios[3] -> bios[0] -> server; server -> bios[1] -> bios[2] -> client
        if bios[3].pending:
            bios[0].write(bios[3].read())
        if bios[1].pending:
            bios[2].write(bios[1].read())
        if all(done.values()) and not bios[1].pending and not bios[3].pending:
            return server, client
    raise AssertionError("TLS handshake did not finish")
