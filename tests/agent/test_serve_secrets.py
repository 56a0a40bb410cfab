"""Secrets never reach the log: a real `specwatch serve` with a password in its PostgreSQL URL, a webhook
URL carrying userinfo, a path token and a query token, and a bearer token, driven into errors (wrong
tokens, bad requests, an alert the webhook answers with 500 every time); the whole log is then searched
for each secret."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from served import Served, free_port

DB_PASSWORD = "pg-Secret-4417xq"
HOOK_PASSWORD = "hook-Pass-9921zz"
HOOK_PATH_TOKEN = "Zz9XyW8vU7tS6rQ5pO4n"
HOOK_QUERY_TOKEN = "qtok-3381-abcdefgh"
TOKEN = "bearer-Token-0123456789abcdef"
SECRETS = (DB_PASSWORD, HOOK_PASSWORD, HOOK_PATH_TOKEN, HOOK_QUERY_TOKEN, TOKEN)


class Failing(BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self):  # noqa: N802 (http.server's naming)
        type(self).hits += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args):
        pass



def cost_record(k: int) -> dict:
    """A step where speculation loses (nothing accepted, drafting costly): the switch turns it off."""
    return {"domain": "slow", "lookahead": k, "accepted": 0, "emitted": 1, "draft_seconds": 0.004 * k,
            "verify_seconds": 0.012 if k else 0.010, "target_version": "t1", "draft_version": "d1",
            "accepted_mask": [0] * k}


def test_no_secret_reaches_the_log(tmp_path, schema):
    hook = HTTPServer(("127.0.0.1", free_port()), Failing)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    webhook = (f"http://alerts:{HOOK_PASSWORD}@127.0.0.1:{hook.server_port}/services/T0/{HOOK_PATH_TOKEN}"
               f"?token={HOOK_QUERY_TOKEN}")
    db = f"postgresql://postgres:{DB_PASSWORD}@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    env = {"SPECWATCH_DB": db, "SPECWATCH_WEBHOOK_URL": webhook, "SPECWATCH_TOKEN": TOKEN,
           "SPECWATCH_ALERTS_SECONDS": "0.5"}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with Served(tmp_path, env=env) as s:
            assert s.client.post("/v1/steps", json={"records": []}).status_code == 401
            assert s.client.post("/v1/steps", json={"records": []},
                                 headers={"Authorization": f"Bearer {TOKEN}x"}).status_code == 401
            assert s.client.post("/v1/steps", content=b'{"records": [}', headers=auth).status_code == 422
            assert s.client.post("/v1/steps", json={"records": [{"domain": TOKEN}]}, headers=auth).status_code == 422
            for _ in range(600):
                d = s.client.get("/v1/decision", params={"domain": "slow"}).json()
                r = s.client.post("/v1/steps", json={"records": [cost_record(d["lookahead"])] * 5}, headers=auth)
                assert r.status_code == 202
                if Failing.hits >= 2:
                    break
            deadline = time.monotonic() + 20.0  # the sink retries the failed send on its own schedule
            while Failing.hits < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert Failing.hits >= 2, "no alert reached the webhook"
            code, _ = s.stop()
            assert code == 0
            log = s.output()
    finally:
        hook.shutdown()
    leaked = [secret for secret in SECRETS if secret in log]
    assert not leaked, f"secrets in the log: {leaked}\n{log}"
    assert "postgresql://postgres:***@127.0.0.1:5432/test" in log  # the start-up line, redacted
    assert "alert sink webhook failed" in log  # the 5xx was logged, its URL redacted
