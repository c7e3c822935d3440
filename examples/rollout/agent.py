#!/usr/bin/env python3
"""An agent as esopt's rollout, in Python's standard library (any framework works the same way).

esopt sends one JSON request per episode:
    {"task": {...}, "seed": 7, "inference": {"baseUrl": ".../v1", "model": "member-3-5", "apiKey": "esr_...",
                                             "certificate": "-----BEGIN CERTIFICATE-----..." (https boxes only)}}
and the agent answers {"reward": <number>, "info": {...}}. The agent plays the episode with the model it is
given: every chat completion goes to inference.baseUrl with inference.apiKey, which counts the calls. A reward
from an agent that never called its model is refused.

This agent solves tasks of the form {"question": "...", "answer": "..."} (from a task suite) or {"seed": N}
(esopt's own seed tasks: "repeat the number N"): it asks, then asks once more to answer with the answer only,
and scores the last reply: 1 for the exact answer, else the share of the answer's characters it got in order.

Run it as an endpoint:  python3 examples/rollout/agent.py --port 8765   (POST /rollout)
or as a command:         python3 examples/rollout/agent.py --stdio      (one request on stdin, answer on stdout)
"""
import argparse
import json
import ssl
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_REQUEST_BYTES = 1 << 20


def chat(inference, messages, max_tokens=16):
    body = json.dumps({"model": inference["model"], "messages": messages, "max_tokens": max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(
        inference["baseUrl"].rstrip("/") + "/chat/completions",
        data=body,
        headers={"content-type": "application/json", "authorization": "Bearer " + inference["apiKey"]},
    )
    context = None
    if inference.get("certificate"):
        # The box's certificate is self-signed and names no host: trust exactly it.
        context = ssl.create_default_context(cadata=inference["certificate"])
        context.check_hostname = False
    with urllib.request.urlopen(req, timeout=60, context=context) as res:
        return json.load(res)["choices"][0]["message"].get("content") or ""


def score(reply, answer):
    reply, answer = reply.strip(), str(answer)
    if reply == answer:
        return 1.0
    got, i = 0, 0
    for ch in reply:
        if i < len(answer) and ch == answer[i]:
            got, i = got + 1, i + 1
    return 0.5 * got / max(1, len(answer))


def play(request):
    task, inference = request["task"], request["inference"]
    if "question" in task:
        question, answer = task["question"], task["answer"]
    else:
        answer = str(task.get("seed", request.get("seed", 0)) % 1000)
        question = "Repeat this number: " + answer
    messages = [{"role": "system", "content": "You answer with the answer only."}, {"role": "user", "content": question}]
    first = chat(inference, messages)
    messages += [{"role": "assistant", "content": first}, {"role": "user", "content": "Your final answer, nothing else:"}]
    final = chat(inference, messages)
    return {"reward": score(final, answer), "info": {"turns": 2, "final": final[:200]}}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/rollout":
            self.send_error(404)
            return
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_REQUEST_BYTES:
            self.send_error(413)
            return
        try:
            answer = play(json.loads(self.rfile.read(length)))
            status, body = 200, json.dumps(answer).encode()
        except Exception as err:  # the episode fails with the status; the message stays here
            print("rollout failed:", repr(err), file=sys.stderr)
            status, body = 500, b'{"error": "rollout failed"}'
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--stdio", action="store_true", help="play one request from stdin, answer on stdout")
    args = parser.parse_args()
    if args.stdio:
        json.dump(play(json.load(sys.stdin)), sys.stdout)
        return
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
