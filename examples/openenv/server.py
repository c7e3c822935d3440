#!/usr/bin/env python3
"""A reference environment server speaking OpenEnv's protocol, in Python's standard library only.

The game: guess a secret integer in 1..N (N = 16 by default) from higher/lower hints, with a few tries.
Reward 1.0 for the right guess (minus 0.05 per extra try), 0.0 when the tries run out: a learnable reward
(binary search wins every time).

Endpoints (OpenEnv's wire format):
  GET  /health  -> {"status": "healthy"}
  GET  /schema  -> {"action": JSON Schema, "observation": JSON Schema, "state": JSON Schema}
  POST /reset   {"seed": int, ...} -> {"observation": {...}, "reward": null, "done": false}
  POST /step    {"action": {"guess": int}} -> {"observation": {...}, "reward": float|null, "done": bool}
  GET  /state   -> {"episode_id": ..., "step_count": int}
  GET  /ws      WebSocket session, one game per connection: {"type": "reset"|"step"|"state"|"close", "data": {...}}
                answered by {"type": "observation"|"state"|"error", "data": {...}}

HTTP /reset and /step act on one game shared by the whole server (one episode at a time); /ws gives each
connection a game of its own, which is how concurrent episodes are played.

Usage: python3 examples/openenv/server.py --port 0   (prints the port it listens on, then serves)
       --key-env NAME: every endpoint but /health wants `Authorization: Bearer $NAME` (401 otherwise), the way a
       server on the internet checks the key esopt sends (`X-Esopt-Environment-Key` / `--environment-key-env`).
"""
import argparse
import base64
import hashlib
import hmac
import os
import json
import random
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The key every call but /health must carry (--key-env); None: an open server.
REQUIRED_KEY = None
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 1 << 20

ACTION_SCHEMA = {
    "type": "object",
    "title": "GuessAction",
    "properties": {"guess": {"type": "integer", "minimum": 1, "maximum": 16, "description": "your guess"}},
    "required": ["guess"],
    "additionalProperties": False,
}
OBSERVATION_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string"}, "tries_left": {"type": "integer"}},
}
STATE_SCHEMA = {"type": "object", "properties": {"episode_id": {"type": "string"}, "step_count": {"type": "integer"}}}


class Game:
    def __init__(self, high=16, tries=6):
        self.high, self.tries = high, tries
        self.reset()

    def reset(self, seed=None, episode_id=None, **_ignored):
        self.secret = random.Random(seed).randint(1, self.high)
        self.left, self.steps, self.done, self.episode_id = self.tries, 0, False, episode_id
        return self._answer(f"Guess my number between 1 and {self.high}. You have {self.tries} tries.", None)

    def step(self, action):
        if not isinstance(action, dict) or set(action) - {"guess", "metadata"} or not isinstance(action.get("guess"), int) or isinstance(action.get("guess"), bool):
            raise ValueError("the action must be {\"guess\": integer}")
        if self.done:
            raise RuntimeError("the episode is over; reset first")
        guess = action["guess"]
        self.steps += 1
        self.left -= 1
        if guess == self.secret:
            self.done = True
            return self._answer(f"{guess} is right!", max(0.0, 1.0 - 0.05 * (self.steps - 1)))
        if self.left == 0:
            self.done = True
            return self._answer(f"{guess} is wrong and you have no tries left.", 0.0)
        hint = "higher" if guess < self.secret else "lower"
        return self._answer(f"{guess} is wrong: my number is {hint}.", None)

    def _answer(self, message, reward):
        return {"observation": {"message": message, "tries_left": self.left}, "reward": reward, "done": self.done}

    def state(self):
        return {"episode_id": self.episode_id, "step_count": self.steps}


shared_game = Game()
shared_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_MESSAGE:
            raise ValueError("body too large")
        return json.loads(self.rfile.read(length) or b"{}")

    def _authorized(self):
        """True when no key is wanted, or the request carries exactly it (compared in constant time)."""
        if REQUIRED_KEY is None:
            return True
        given = self.headers.get("authorization", "")
        if hmac.compare_digest(given.encode(), ("Bearer " + REQUIRED_KEY).encode()):
            return True
        self._json(401, {"detail": "missing or wrong key"})
        return False

    def do_GET(self):
        if self.path == "/health":
            return self._json(200, {"status": "healthy"})
        if not self._authorized():
            return None
        if self.path == "/schema":
            return self._json(200, {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA})
        if self.path == "/state":
            with shared_lock:
                return self._json(200, shared_game.state())
        if self.path == "/ws" and self.headers.get("upgrade", "").lower() == "websocket":
            return self._websocket()
        self._json(404, {"detail": "Not Found"})

    def do_POST(self):
        if not self._authorized():
            return None
        try:
            body = self._body()
        except ValueError:
            return self._json(400, {"detail": "invalid JSON"})
        with shared_lock:
            if self.path == "/reset":
                return self._json(200, shared_game.reset(**{k: v for k, v in body.items() if k in ("seed", "episode_id")}))
            if self.path == "/step":
                try:
                    return self._json(200, shared_game.step(body.get("action")))
                except ValueError as e:
                    return self._json(422, {"detail": str(e)})
                except RuntimeError as e:
                    return self._json(500, {"detail": str(e)})
        self._json(404, {"detail": "Not Found"})

    # --- RFC 6455, just what OpenEnv's session needs: text frames, close, ping ---
    def _websocket(self):
        key = self.headers.get("sec-websocket-key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        game = Game()
        while True:
            frame = self._read_frame()
            if frame is None:
                return
            opcode, payload = frame
            if opcode == 8:
                self._send_frame(8, payload[:2])
                return
            if opcode == 9:
                self._send_frame(10, payload)
                continue
            if opcode != 1:
                continue
            try:
                message = json.loads(payload.decode())
                kind = message.get("type")
                data = message.get("data") or {}
                if kind == "reset":
                    answer = {"type": "observation", "data": game.reset(**{k: v for k, v in data.items() if k in ("seed", "episode_id")})}
                elif kind == "step":
                    try:
                        answer = {"type": "observation", "data": game.step(data)}
                    except ValueError as e:
                        answer = {"type": "error", "data": {"message": str(e), "code": "VALIDATION_ERROR"}}
                elif kind == "state":
                    answer = {"type": "state", "data": game.state()}
                elif kind == "close":
                    self._send_frame(8, struct.pack("!H", 1000))
                    return
                else:
                    answer = {"type": "error", "data": {"message": f"Unknown message type: {kind}", "code": "UNKNOWN_TYPE"}}
            except Exception as e:  # the session stays open, as OpenEnv's does
                answer = {"type": "error", "data": {"message": str(e), "code": "EXECUTION_ERROR"}}
            self._send_frame(1, json.dumps(answer).encode())

    def _read_exact(self, n):
        data = self.rfile.read(n)
        return data if data is not None and len(data) == n else None

    def _read_frame(self):
        head = self._read_exact(2)
        if head is None:
            return None
        opcode, length = head[0] & 0x0F, head[1] & 0x7F
        masked = head[1] & 0x80
        if length == 126:
            ext = self._read_exact(2)
            length = struct.unpack("!H", ext)[0] if ext else None
        elif length == 127:
            ext = self._read_exact(8)
            length = struct.unpack("!Q", ext)[0] if ext else None
        if length is None or length > MAX_MESSAGE:
            return None
        mask = self._read_exact(4) if masked else b"\0\0\0\0"
        payload = self._read_exact(length) if length else b""
        if mask is None or payload is None:
            return None
        return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

    def _send_frame(self, opcode, payload):
        n = len(payload)
        head = bytes([0x80 | opcode]) + (bytes([n]) if n < 126 else bytes([126]) + struct.pack("!H", n) if n < 65536 else bytes([127]) + struct.pack("!Q", n))
        try:
            self.wfile.write(head + payload)
            self.wfile.flush()
        except OSError:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--key-env", help="environment variable holding the key every call but /health must carry")
    args = parser.parse_args()
    global REQUIRED_KEY
    if args.key_env:
        REQUIRED_KEY = os.environ.get(args.key_env)
        if not REQUIRED_KEY:
            parser.error(f"--key-env: {args.key_env} is not set")
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
