"""A TCP proxy that can go silent: kube-scheduler's path to the extender cut while both live.

A partition or a broken Service path looks like this from kube-scheduler: connections are
accepted (or hang), requests get no answer, every call waits its httpTimeout. `cut()` makes the
proxy swallow everything, on the connections it already carries and on new ones; `restore()`
forwards new connections again (kube-scheduler drops a connection that timed out and opens another).
"""

from __future__ import annotations

import socket
import threading


class BlackholeProxy:
    def __init__(self, target_port: int | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.target_port = target_port  # None: refuse (close) every connection until it is set
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.silent = threading.Event()
        self._closed = False
        threading.Thread(target=self._accept, name="blackhole-accept", daemon=True).start()

    def cut(self) -> None:
        self.silent.set()

    def restore(self) -> None:
        self.silent.clear()

    def close(self) -> None:
        self._closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        if not self.silent.is_set():
            try:
                if self.target_port is None:
                    raise OSError("no target yet")
                upstream = socket.create_connection((self.host, self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                return
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        self._pipe(client, upstream)

    def _pipe(self, source: socket.socket, sink: socket.socket | None) -> None:
        """Forward source -> sink until either closes; while silent (or with no sink), swallow."""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if sink is not None and not self.silent.is_set():
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass
