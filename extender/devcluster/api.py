"""A small JSON client for the local API server (requests + a client certificate).

The harness, the demo and the e2e tests read results from the API server through this; it is
deliberately plain so a test's assertion is about what the server says, nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests

T = TypeVar("T")


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class Api:
    def __init__(
        self, server: str, ca: str, cert: str | None = None, key: str | None = None, token: str | None = None
    ) -> None:
        self.server = server.rstrip("/")
        self.session = requests.Session()
        self.session.trust_env = False  # loopback only: no proxy, and our CA, not $REQUESTS_CA_BUNDLE
        self.session.verify = ca
        if cert and key:
            self.session.cert = (cert, key)
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> Any:
        response = self.session.request(
            method,
            self.server + path,
            json=body,
            params=params,
            headers={"Content-Type": content_type},
            timeout=timeout,
        )
        if response.status_code >= 400:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise ApiError(response.status_code, message)
        return response.json() if response.content else None

    def get(self, path: str, **params: str) -> Any:
        return self.request("GET", path, params=params or None)

    def list(self, path: str, **params: str) -> list[dict[str, Any]]:
        return self.get(path, **params).get("items") or []

    def create(self, path: str, obj: dict[str, Any], **params: str) -> Any:
        return self.request("POST", path, obj, params=params or None)

    def merge_patch(self, path: str, patch: dict[str, Any]) -> Any:
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def delete(self, path: str, **params: str) -> Any:
        try:
            return self.request("DELETE", path, params=params or None)
        except ApiError as err:
            if err.status != 404:
                raise
            return None

    def ensure(self, path: str, obj: dict[str, Any]) -> Any:
        """Create, or leave as is if it exists."""
        try:
            return self.create(path, obj)
        except ApiError as err:
            if err.status != 409:
                raise
            return None


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60, interval: float = 0.2) -> T:
    """Poll until probe returns something truthy; fail naming what was awaited."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = probe()
            if value:
                return value
        except (requests.RequestException, ApiError) as err:
            last_error = err
        time.sleep(interval)
    raise TimeoutError(
        f"timed out after {timeout:.0f}s waiting for {what}" + (f" (last error: {last_error})" if last_error else "")
    )
